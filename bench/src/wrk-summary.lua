-- wrk's script for `pnpm bench http` (bench/src/http.ts).
-- With WRK_IDS_FILE set, the body of every 200 answer is written to that file followed by a line
-- end (the bench counts the ids in it for repeats); every target gets the same script, so the load
-- generator's cost is the same whatever it measures. One file per wrk thread: run with -t1.
-- At the end, one line: requests, duration, latency percentiles in microseconds, socket errors and
-- answers with a status of 400 or more.
-- With WRK_PIPELINE above 1, each connection sends that many requests in one write and waits for
-- all their answers (HTTP pipelining); the latency recorded is that of the whole group.
local depth = tonumber(os.getenv("WRK_PIPELINE") or "1")
if depth > 1 then
  local group
  init = function(args)
    local requests = {}
    for i = 1, depth do requests[i] = wrk.format() end
    group = table.concat(requests)
  end
  request = function() return group end
end

local path = os.getenv("WRK_IDS_FILE")
if path ~= nil and path ~= "" then
  local out
  response = function(status, headers, body)
    if status == 200 then
      if out == nil then out = assert(io.open(path, "wb")) end
      out:write(body, "\n")
    end
  end
end

done = function(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'WRK {"requests":%d,"durationMicros":%d,"p50Micros":%d,"p99Micros":%d,"socketErrors":%d,"non2xx":%d,"bytes":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    errors.connect + errors.read + errors.write + errors.timeout, errors.status, summary.bytes))
end
