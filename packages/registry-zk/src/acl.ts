// ACLs put on the nodes the registry creates, in a plain-object form that does not need the
// ZooKeeper client's classes, and the digest identity helper for digest ACLs.
import { createHash } from "node:crypto";
import { configError } from "@leaf/core";
import zookeeper from "node-zookeeper-client";

/** Digest authentication (ZooKeeper's `digest` scheme: `user:password`). */
export interface DigestAuth {
  username: string;
  password: string;
}

/** A ZooKeeper permission. */
export type ZkPermission = "read" | "write" | "create" | "delete" | "admin";

/** One ACL entry: who (`scheme` and `id`) may do what. */
export interface ZkAcl {
  /** "world", "auth", "digest", "ip", "sasl", ... */
  scheme: string;
  /** "anyone" for world, "" for auth, "user:base64(sha1(user:password))" for digest, ... */
  id: string;
  permissions: readonly ZkPermission[] | "all";
}

/** The `acl` option: a preset or an explicit list. */
export type AclSpec = "open" | "creator" | "creator-read" | readonly ZkAcl[];

const PERMISSIONS: readonly ZkPermission[] = ["read", "write", "create", "delete", "admin"];

/**
 * The id of a digest ACL entry for `username` and `password`: `user:base64(sha1(user:password))`.
 */
export function digestAclId(username: string, password: string): string {
  const digest = createHash("sha1").update(`${username}:${password}`).digest("base64");
  return `${username}:${digest}`;
}

/** Applies the presets and checks an explicit list; throws INVALID_CONFIG naming `acl`. */
export function resolveAcls(spec: AclSpec | undefined, auth: DigestAuth | undefined): ZkAcl[] {
  const preset = spec ?? (auth ? "creator-read" : "open");
  const component = "registry-zk";
  if (preset === "open") return [{ scheme: "world", id: "anyone", permissions: "all" }];
  if (preset === "creator" || preset === "creator-read") {
    if (!auth) {
      throw configError(
        component,
        "acl",
        preset,
        'the "auth" option as well: creator ACLs grant rights to the authenticated identity',
      );
    }
    const creator: ZkAcl = { scheme: "auth", id: "", permissions: "all" };
    return preset === "creator"
      ? [creator]
      : [creator, { scheme: "world", id: "anyone", permissions: ["read"] }];
  }
  if (!Array.isArray(spec) || spec.length === 0) {
    throw configError(
      component,
      "acl",
      spec,
      '"open", "creator", "creator-read" or a non-empty list of { scheme, id, permissions }',
    );
  }
  for (const entry of spec as readonly ZkAcl[]) {
    const permissionsOk =
      entry?.permissions === "all" ||
      (Array.isArray(entry?.permissions) &&
        entry.permissions.length > 0 &&
        entry.permissions.every((p) => PERMISSIONS.includes(p)));
    if (
      !entry ||
      typeof entry.scheme !== "string" ||
      entry.scheme === "" ||
      typeof entry.id !== "string" ||
      !permissionsOk
    ) {
      throw configError(
        component,
        "acl",
        entry,
        `{ scheme, id, permissions: "all" or a non-empty list of ${PERMISSIONS.join(", ")} }`,
      );
    }
  }
  return spec.map((entry) => ({ ...entry }));
}

/** The client library's form of `acls`. */
export function toClientAcls(acls: readonly ZkAcl[]): zookeeper.ACL[] {
  const bits: Record<ZkPermission, number> = {
    read: zookeeper.Permission.READ,
    write: zookeeper.Permission.WRITE,
    create: zookeeper.Permission.CREATE,
    delete: zookeeper.Permission.DELETE,
    admin: zookeeper.Permission.ADMIN,
  };
  return acls.map((acl) => {
    const perms =
      acl.permissions === "all"
        ? zookeeper.Permission.ALL
        : acl.permissions.reduce((sum, p) => sum | bits[p], 0);
    return new zookeeper.ACL(perms, new zookeeper.Id(acl.scheme, acl.id));
  });
}
