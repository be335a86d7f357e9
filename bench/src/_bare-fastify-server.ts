// A bare fastify route for `pnpm bench http`: a constant of an id's length, answered as the id
// endpoints answer (plain text), with fastify's defaults (no logger, no hooks). PORT from the
// environment; prints "bare ready" once listening.
import Fastify from "fastify";

const app = Fastify();
app.get("/", (_request, reply) => {
  reply.send("1256557484213448722");
});
await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT) });
console.log("bare ready");
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
