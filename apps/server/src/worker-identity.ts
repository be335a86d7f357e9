// Who each worker process is to a registry. A server with several worker processes (server.workers)
// is several nodes to its registry: worker process k is the node `{ip}~w{k}:{port}` and worker 1
// keeps `{ip}:{port}`, the node a single-process server (or Java Leaf) on that port is. Each holds
// a worker id of its own, and a worker restarted by the primary is the same node again, as a
// restarted server is. In ZooKeeper's normal mode the node names stay Java Leaf's
// `{ip}:{port}-{sequence}` (no '-' is added: Java Leaf splits them on '-').

/** "" for worker 1, "~w{k}" for worker k: what is added to the node's ip. */
export function workerSuffix(slot: number): string {
  return slot === 1 ? "" : `~w${slot}`;
}

/** The ip under which worker process `slot` is known to the registry (undefined: one process). */
export function workerNodeIp(ip: string, slot: number | undefined): string {
  return slot === undefined ? ip : `${ip}${workerSuffix(slot)}`;
}
