// The fastest id server one can write on Node, the yardstick of `pnpm bench http`: raw node:http,
// a bigint counter, the id as plain text, no routing, no checks, no metrics. PORT from the
// environment; prints "raw ready" once listening.
import { createServer } from "node:http";

let next = 1n;
const server = createServer((_request, response) => {
  response.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
  response.end(String(next++));
});
// As fastify's default, so that neither server closes a connection wrk keeps open.
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("raw ready"));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
