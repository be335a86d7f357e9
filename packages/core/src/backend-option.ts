// The construction convention's one shared check: every adapter is `new X(options)`, its backend
// given as `url` (a string the adapter connects with and closes) or `client` (a client the caller
// built and keeps: the adapter never closes it). Exactly one of the two.
import { configError } from "./errors";

/** What {@link checkBackend} found: a URL to connect to, or the caller's client. */
export type Backend<Client, Url = string> =
  | { url: Url; client?: undefined }
  | { url?: undefined; client: Client };

/** How {@link checkBackend} judges and describes an adapter's backend options. */
export interface BackendRules<Client, Url extends string | readonly string[] = string> {
  /** The adapter's component name, for messages ("registry-zk", ...). */
  component: string;
  /**
   * What a `url` looks like, for messages ("a ZooKeeper connection string
   * host:port[,host:port][/chroot]").
   */
  url: string;
  /** Judges a `url` value's type (default: a non-empty string). */
  isUrl?: (value: unknown) => value is Url;
  /**
   * What a `client` is, for messages ("a mysql2 Pool"), and how to judge one (by its methods, not
   * its class: it may come from another copy of the library). Without them the adapter takes no
   * client, and `noClient` says why.
   */
  client?: { what: string; is: (value: unknown) => value is Client };
  /** Why the adapter takes no client (when `client` is not given). */
  noClient?: string;
}

const nonEmptyString = (value: unknown): value is string =>
  typeof value === "string" && value.length > 0;

/**
 * Checks that `options` names its backend as exactly one of `url` and `client`, of the right kind.
 * @throws LeafError INVALID_CONFIG naming the option, the value seen and what is expected.
 */
export function checkBackend<Client, Url extends string | readonly string[] = string>(
  options: { url?: unknown; client?: unknown } | undefined,
  rules: BackendRules<Client, Url>,
): Backend<Client, Url> {
  const given = (options ?? {}) as Record<string, unknown>;
  const isUrl = rules.isUrl ?? (nonEmptyString as (value: unknown) => value is Url);
  const { url, client } = given;
  if (url !== undefined && client !== undefined) {
    throw configError(
      rules.component,
      "client",
      client,
      `either url or client, not both (url is ${JSON.stringify(url)})`,
    );
  }
  if (client !== undefined) {
    if (!rules.client) {
      throw configError(
        rules.component,
        "client",
        client,
        `no client: give url (${rules.noClient})`,
      );
    }
    if (!rules.client.is(client)) {
      throw configError(rules.component, "client", client, rules.client.what);
    }
    return { client: client as Client };
  }
  if (url === undefined) {
    const or = rules.client ? ` (or a client: ${rules.client.what})` : "";
    throw configError(rules.component, "url", url, `${rules.url}${or}`);
  }
  if (!isUrl(url)) throw configError(rules.component, "url", url, rules.url);
  return { url };
}
