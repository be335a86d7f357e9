// The admin API, served only when server.adminToken is set: list tags, create a tag, change its
// step, delete a tag. Each call needs `Authorization: Bearer <admin token>`.
import { ErrorCodes, LeafCodes, LeafError } from "@leaf/core";
import type { TagRecord } from "@leaf/segment";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AdminToken } from "./access-tokens";
import type { WorkerLink } from "./cluster-worker";
import { badParameter, HttpCodes, HttpError } from "./http-errors";
import type { IdSources } from "./id-sources";
import { readTag } from "./request-params";
import { registerHighWaterRoutes } from "./routes-high-water";

const MAX_STEP = 2_147_483_647;
const MAX_ID = (1n << 63n) - 1n;

/** A tag record as JSON: ids as strings. */
export function tagJson(record: TagRecord) {
  return {
    tag: record.tag,
    maxId: record.maxId.toString(),
    step: record.step,
    description: record.description,
    updatedAt: record.updatedAt === null ? null : new Date(record.updatedAt).toISOString(),
  };
}

/** What each method's body holds, for the hints of its errors. */
const BODY_EXAMPLE: Record<string, string> = {
  POST: '{"tag": "order", "step": 1000} (fields tag, step, startId, description)',
  PATCH: '{"step": 5000} (the only field: step)',
};

function example(request: FastifyRequest): string {
  return BODY_EXAMPLE[request.method] ?? BODY_EXAMPLE.POST!;
}

function body(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badParameter(
      "body",
      value,
      `a JSON object (Content-Type: application/json), e.g. ${example(request)}`,
    );
  }
  return value as Record<string, unknown>;
}

/**
 * The first key of `value` that could change the server's objects if copied: `__proto__`, or
 * `constructor` holding `prototype` (what fastify refuses too). Walks without recursion, so a body
 * nested thousands of levels deep is checked as well.
 */
function forbiddenKey(value: unknown): string | undefined {
  const stack: Array<{ node: unknown; path: string }> = [{ node: value, path: "" }];
  while (stack.length > 0) {
    const { node, path } = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    for (const key of Object.keys(node)) {
      const child = (node as Record<string, unknown>)[key];
      const at = Array.isArray(node) ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`;
      if (key === "__proto__") return at;
      if (
        key === "constructor" &&
        typeof child === "object" &&
        child !== null &&
        Object.hasOwn(child, "prototype")
      ) {
        return `${at}.prototype`;
      }
      stack.push({ node: child, path: at });
    }
  }
  return undefined;
}

/**
 * The admin API's JSON parser: says which of the two refusals it is, a body that is not JSON (with
 * the parser's reason) or valid JSON with a key that could change the server's objects.
 */
function parseJsonBody(
  request: FastifyRequest,
  text: string | Buffer,
  done: (error: Error | null, body?: unknown) => void,
): void {
  let value: unknown;
  try {
    value = JSON.parse(text.toString());
  } catch (error) {
    const reason = String((error as Error).message).slice(0, 120);
    done(
      new HttpError(
        400,
        HttpCodes.BAD_REQUEST,
        `[leaf] [server] bad request: the body is not valid JSON (${reason}); send a JSON object, e.g. ${example(request)}`,
      ),
      undefined,
    );
    return;
  }
  const key = forbiddenKey(value);
  if (key !== undefined) {
    const shown = key.length > 80 ? `${key.slice(0, 40)}...${key.slice(-37)}` : key;
    done(
      new HttpError(
        400,
        HttpCodes.BAD_REQUEST,
        `[leaf] [server] bad request: the body is valid JSON but has the key ${shown}; keys named __proto__ (or constructor holding prototype) are refused because they could change the server's own objects, and no admin field has that name; send a JSON object without it, e.g. ${example(request)}`,
      ),
      undefined,
    );
    return;
  }
  done(null, value);
}

function readStep(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_STEP) {
    throw badParameter(
      "step",
      value,
      `an integer from 1 to ${MAX_STEP.toLocaleString("en-US")} (a JSON number)`,
    );
  }
  return value;
}

function readStartId(value: unknown): bigint {
  if (value === undefined) return 1n;
  const ok =
    (typeof value === "string" && /^[0-9]{1,19}$/.test(value)) ||
    (typeof value === "number" && Number.isSafeInteger(value) && value >= 0);
  const id = ok ? BigInt(value as string | number) : -1n;
  if (id < 0n || id > MAX_ID) {
    throw badParameter("startId", value, `a decimal string (or safe integer) from 0 to ${MAX_ID}`);
  }
  return id;
}

function readDescription(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || value.length > 256) {
    throw badParameter("description", value, "a string of up to 256 characters, or null");
  }
  return value;
}

function refuseUnknownFields(data: Record<string, unknown>, allowed: string[]): void {
  for (const key of Object.keys(data)) {
    if (!allowed.includes(key)) {
      throw badParameter(key, data[key], `no such field; the fields are ${allowed.join(", ")}`);
    }
  }
}

/** Registers the admin API (or, without a token, a 404 that says how to turn it on). */
export function registerAdminRoutes(
  app: FastifyInstance,
  sources: IdSources,
  admin: AdminToken | undefined,
  workers?: () => WorkerLink | undefined,
): void {
  if (!admin) {
    const off = () => {
      throw new HttpError(
        404,
        HttpCodes.NOT_FOUND,
        "[leaf] [server] the admin API is off on this server: set server.adminToken (LEAF_SERVER_ADMIN_TOKEN) to turn it on",
      );
    };
    // Any query parameter: the answer is the same whatever the request holds.
    app.all("/api/v1/admin", { config: { query: "*" } }, off);
    app.all("/api/v1/admin/*", { config: { query: "*" } }, off);
    return;
  }
  app.register(async (adminApi) => {
    adminApi.removeContentTypeParser("application/json");
    adminApi.addContentTypeParser("application/json", { parseAs: "string" }, parseJsonBody);
    registerAdminApi(adminApi, sources, admin, workers ?? (() => undefined));
  });
}

function registerAdminApi(
  app: FastifyInstance,
  sources: IdSources,
  admin: AdminToken,
  workers: () => WorkerLink | undefined,
): void {
  const guard = { onRequest: async (request: FastifyRequest) => admin.check(request) };
  registerHighWaterRoutes(app, sources, guard, workers);
  // With several worker processes, a change is answered once every worker re-read its tags: a
  // created tag is served, a deleted one refused, by whichever worker the next request reaches.
  const changed = async () => workers()?.refreshAll();

  app.get("/api/v1/admin/tags", guard, async (_request, reply: FastifyReply) => {
    const { generator, store } = sources.segment();
    const records = await store.describeTags();
    const tags = records.map((record) => {
      const snapshot = generator.snapshot(record.tag);
      return {
        ...tagJson(record),
        served: snapshot !== undefined,
        idsLeft: snapshot ? snapshot.idsLeft.toString() : null,
        currentStep: snapshot ? snapshot.step : null,
      };
    });
    return reply.send({ store: store.kind, count: tags.length, tags });
  });

  app.post("/api/v1/admin/tags", guard, async (request, reply: FastifyReply) => {
    const { generator } = sources.segment();
    const data = body(request);
    refuseUnknownFields(data, ["tag", "step", "startId", "description"]);
    const tag = readTag(data.tag);
    const step = readStep(data.step);
    const startId = readStartId(data.startId);
    // A tag starting within one step of 2^63 - 1 has no room for its first range: used up at once.
    if (startId > MAX_ID - BigInt(step)) {
      throw badParameter(
        "startId",
        data.startId,
        `at most ${MAX_ID - BigInt(step)} (2^63 - 1 minus the step ${step}): a tag starting within one step of the end has no room for a range and would answer TAG_EXHAUSTED at its first request`,
      );
    }
    const record = await generator.createTag({
      tag,
      step,
      startId,
      description: readDescription(data.description),
    });
    await changed();
    return reply.code(201).send(tagJson(record));
  });

  app.patch<{ Params: { tag: string } }>(
    "/api/v1/admin/tags/:tag",
    guard,
    async (request, reply: FastifyReply) => {
      const { generator } = sources.segment();
      const tag = readTag(request.params.tag);
      const data = body(request);
      refuseUnknownFields(data, ["step"]);
      const record = await generator.updateStep(tag, readStep(data.step));
      await changed();
      return reply.send(tagJson(record));
    },
  );

  app.delete<{ Params: { tag: string } }>(
    "/api/v1/admin/tags/:tag",
    guard,
    async (request, reply: FastifyReply) => {
      const { generator, store } = sources.segment();
      const tag = readTag(request.params.tag);
      // The row as the store deleted it, read and deleted in one step: its max_id is final, above
      // every id the tag handed out. The store refuses to create the tag again below it.
      const deleted = await generator.deleteTag(tag);
      await changed();
      if (deleted === undefined) {
        throw new LeafError({
          component: "server",
          code: ErrorCodes.UNKNOWN_TAG,
          leafCode: LeafCodes.SEGMENT_UNKNOWN_TAG,
          message: `unknown tag ${JSON.stringify(tag)} in the ${store.kind} store: nothing to delete (GET /api/v1/admin/tags lists the tags)`,
          details: { tag },
        });
      }
      return reply.send({ ...tagJson(deleted), deleted: true });
    },
  );
}
