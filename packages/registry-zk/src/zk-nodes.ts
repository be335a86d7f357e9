// The node operations of a ZooKeeper session (read, check, list, create, write, delete, an atomic
// multi, create with parents) as promises; a missing node reads as undefined. ZkSession extends
// this and sends each through its request(), which times it out and counts a write the leader
// answered as proof of life: apart so that zk-session.ts reads as those liveness rules.
import zookeeper from "node-zookeeper-client";
import { type MultiOp, type NodeStat, toStat, toWatcher, ZkCodes, zkCode } from "./zk-client";

/** The node operations of `ZkSession` (zk-session.ts), over the request it implements. */
export abstract class ZkNodeOperations {
  /** The connected client the requests go through. */
  protected abstract readonly client: zookeeper.Client;
  /** The ACLs of every node the session creates. */
  protected abstract readonly acls: zookeeper.ACL[];

  /**
   * Sends one request: `run` calls the client and `done` with its answer. Rejects with a LeafError:
   * UNAVAILABLE (ZooKeeper's code in `details.zkCode`), INVALID_CONFIG on an auth refusal, CLOSED.
   */
  protected abstract request<T>(
    what: string,
    kind: "read" | "write",
    run: (done: (error: unknown, value: T | undefined) => void) => void,
  ): Promise<T>;

  /** Creates the chroot path, the only node that can be missing above a top-level node. */
  protected abstract createChroot(): Promise<void>;

  /** Reads a node; undefined when it does not exist. */
  async getData(
    path: string,
    watcher?: (type: "deleted" | "changed" | "created") => void,
  ): Promise<{ data: Buffer; stat: NodeStat } | undefined> {
    try {
      return await this.request<{ data: Buffer; stat: NodeStat }>(
        `read ${path}`,
        "read",
        (done) => {
          const callback = (error: unknown, data: Buffer, stat: zookeeper.Stat) =>
            done(error, error ? undefined : { data: data ?? Buffer.alloc(0), stat: toStat(stat) });
          if (watcher) this.client.getData(path, toWatcher(watcher), callback);
          else this.client.getData(path, callback);
        },
      );
    } catch (error) {
      if (zkCode(error) === ZkCodes.NO_NODE) return undefined;
      throw error;
    }
  }

  /** A node's metadata; undefined when it does not exist. A watcher fires once on change. */
  exists(
    path: string,
    watcher?: (type: "deleted" | "changed" | "created") => void,
  ): Promise<NodeStat | undefined> {
    return this.request(`check ${path}`, "read", (done) => {
      const callback = (error: unknown, stat: zookeeper.Stat | null) =>
        done(error, stat ? toStat(stat) : undefined);
      if (watcher) this.client.exists(path, toWatcher(watcher), callback);
      else this.client.exists(path, callback);
    });
  }

  /** A node's children; undefined when the node does not exist. */
  async getChildren(path: string): Promise<{ children: string[]; stat: NodeStat } | undefined> {
    try {
      return await this.request(`list ${path}`, "read", (done) =>
        this.client.getChildren(path, (error, children, stat) =>
          done(error, error ? undefined : { children, stat: toStat(stat) }),
        ),
      );
    } catch (error) {
      if (zkCode(error) === ZkCodes.NO_NODE) return undefined;
      throw error;
    }
  }

  /** Creates a node with the session's ACLs; returns its path (with the sequence, if any). */
  create(
    path: string,
    data: Buffer,
    mode: "persistent" | "persistent-sequential" | "ephemeral",
  ): Promise<string> {
    const clientMode = {
      persistent: zookeeper.CreateMode.PERSISTENT,
      "persistent-sequential": zookeeper.CreateMode.PERSISTENT_SEQUENTIAL,
      ephemeral: zookeeper.CreateMode.EPHEMERAL,
    }[mode];
    return this.request(`create ${path}`, "write", (done) =>
      this.client.create(path, data, this.acls, clientMode, (error, created) =>
        done(error, created),
      ),
    );
  }

  /** Writes a node's data when its version is `version` (-1: any); returns the new metadata. */
  setData(path: string, data: Buffer, version: number): Promise<NodeStat> {
    return this.request(`write ${path}`, "write", (done) =>
      this.client.setData(path, data, version, (error, stat) =>
        done(error, error ? undefined : toStat(stat)),
      ),
    );
  }

  /** Deletes a node when its version is `version` (-1: any). */
  remove(path: string, version: number): Promise<void> {
    return this.request(`delete ${path}`, "write", (done) =>
      this.client.remove(path, version, (error) => done(error, undefined)),
    );
  }

  /** Runs `ops` atomically: all or none. Rejects with the first failing op's code. */
  multi(ops: readonly MultiOp[]): Promise<void> {
    const what = `commit ${ops.map((o) => `${o.op} ${o.path}`).join(", ")}`;
    return this.request(what, "write", (done) => {
      const transaction = this.client.transaction();
      for (const o of ops) {
        if (o.op === "create") {
          const mode =
            o.mode === "ephemeral"
              ? zookeeper.CreateMode.EPHEMERAL
              : zookeeper.CreateMode.PERSISTENT;
          transaction.create(o.path, o.data, this.acls, mode);
        } else if (o.op === "setData") transaction.setData(o.path, o.data, o.version);
        else if (o.op === "check") transaction.check(o.path, o.version);
        else transaction.remove(o.path, o.version);
      }
      transaction.commit((error) => done(error, undefined));
    });
  }

  /** Creates `path` and its missing parents (persistent, empty, the session's ACLs). */
  async ensurePath(path: string): Promise<void> {
    let current = "";
    for (const part of path.split("/").slice(1)) {
      current = `${current}/${part}`;
      if (await this.exists(current)) continue;
      try {
        await this.create(current, Buffer.alloc(0), "persistent");
      } catch (error) {
        if (zkCode(error) === ZkCodes.NODE_EXISTS) continue;
        if (zkCode(error) === ZkCodes.NO_NODE && current.split("/").length === 2) {
          // Only the chroot itself can be missing above a top-level node.
          await this.createChroot();
          await this.ensurePath(path);
          return;
        }
        throw error;
      }
    }
  }
}
