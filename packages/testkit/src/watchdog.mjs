// Watchdog of @leaf/testkit: started detached by a test process, it outlives that process. When the
// process dies without cleaning up (SIGKILL, crash), it kills the servers and children it started
// and removes their temp folders. Plain JavaScript so it starts in a few ms without a loader.
//
// Protocol: JSON lines on stdin from the watched process:
//   {"op":"dir","dir":"/tmp/leaf-testkit-redis-x"}   watch a temp folder (before its server starts)
//   {"op":"forget-dir","dir":"..."}                   the process removed it itself
//   {"op":"pid","pid":123}                            watch a process
//   {"op":"forget-pid","pid":123}                     it has exited
// The watched process is gone when stdin ends (the kernel closes the pipe) or its pid stops existing.
import { readdirSync, readFileSync, rmSync } from "node:fs";

const parentPid = Number(process.argv[2]);
const dirs = new Set();
/** pid -> start time from /proc (null when /proc is not there), so a reused pid is never killed. */
const pids = new Map();
let cleaning = false;

/** Start time of a process in clock ticks since boot (Linux), undefined if gone, null if unknown. */
function startTime(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19];
  } catch (error) {
    if (error.code === "ENOENT") {
      try {
        readdirSync("/proc/self");
        return undefined;
      } catch {
        return null;
      }
    }
    return null;
  }
}

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // A zombie has exited; whoever reaps it (init) does not matter here.
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

function kill(pid) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {}
  try {
    process.kill(pid, "SIGKILL");
  } catch {}
}

/** Processes whose command line names one of the watched folders (Linux only). */
function processesUsingDirs() {
  const found = [];
  if (dirs.size === 0) return found;
  let entries;
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let cmdline;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
    } catch {
      continue;
    }
    for (const dir of dirs) {
      if (cmdline.includes(dir)) {
        found.push(pid);
        break;
      }
    }
  }
  return found;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function cleanUpAndExit() {
  if (cleaning) return;
  cleaning = true;
  const victims = new Set(processesUsingDirs());
  for (const [pid, started] of pids) {
    const now = startTime(pid);
    if (now === undefined) continue;
    if (started === null || now === null || now === started) victims.add(pid);
  }
  for (const pid of victims) kill(pid);
  const deadline = Date.now() + 5000;
  while ([...victims].some(alive) && Date.now() < deadline) await sleep(20);
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
    } catch {}
  }
  process.exit(0);
}

function handle(message) {
  switch (message.op) {
    case "dir":
      dirs.add(message.dir);
      break;
    case "forget-dir":
      dirs.delete(message.dir);
      break;
    case "pid": {
      const started = startTime(message.pid);
      if (started !== undefined) pids.set(message.pid, started);
      break;
    }
    case "forget-pid":
      pids.delete(message.pid);
      break;
  }
}

let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let newline = buffered.indexOf("\n");
  while (newline >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    try {
      handle(JSON.parse(line));
    } catch {}
    newline = buffered.indexOf("\n");
  }
});
process.stdin.on("end", cleanUpAndExit);
process.stdin.on("error", cleanUpAndExit);

setInterval(() => {
  try {
    process.kill(parentPid, 0);
  } catch (error) {
    if (error.code === "ESRCH") cleanUpAndExit();
  }
}, 500);
