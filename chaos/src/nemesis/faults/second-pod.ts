// A second pod with a StatefulSet ordinal already running (issue 24, item 4): after a force-delete
// the old pod can still run while its replacement starts on a volume of its own. The spare server
// (A2: HOSTNAME leaf-0, A's ordinal, its own data folder) is started under load for 3-10 s.
import { type Fault, NO_ANSWER } from "./fault";

export const secondPod: Fault = {
  name: "second-pod",
  title: "a second pod with a running pod's StatefulSet ordinal, on its own volume, for 3-10 s",
  targets: (family) => family.servers.filter((s) => s.spare === "second-pod").map((s) => s.label),
  resources: (target) => [`process:${target}`],
  durationMs: [3000, 10_000],
  async start(c, _family, target) {
    await c.startServer(target, 1);
    return true;
  },
  async stop(c, _family, target) {
    const server = c.server(target);
    if (server.running) await server.kill();
  },
  effects: (_family, target) => ({
    effects: [{ servers: [target], codes: NO_ANSWER }],
    settleMs: 1000,
  }),
};
