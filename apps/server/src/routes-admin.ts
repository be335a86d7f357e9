// The admin API, served only when server.adminToken is set: list tags, create a tag, change its
// step. Each call needs `Authorization: Bearer <admin token>`.
import type { TagRecord } from "@leaf/segment";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AdminToken } from "./access-tokens";
import { badParameter, HttpCodes, HttpError } from "./http-errors";
import type { IdSources } from "./id-sources";
import { readTag } from "./request-params";

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

function body(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badParameter(
      "body",
      value,
      'a JSON object (Content-Type: application/json), e.g. {"tag": "order", "step": 1000}',
    );
  }
  return value as Record<string, unknown>;
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
): void {
  if (!admin) {
    const off = () => {
      throw new HttpError(
        404,
        HttpCodes.NOT_FOUND,
        "[leaf] [server] the admin API is off on this server: set server.adminToken (LEAF_SERVER_ADMIN_TOKEN) to turn it on",
      );
    };
    app.all("/api/v1/admin", off);
    app.all("/api/v1/admin/*", off);
    return;
  }
  const guard = { onRequest: async (request: FastifyRequest) => admin.check(request) };

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
    const record = await generator.createTag({
      tag,
      step: readStep(data.step),
      startId: readStartId(data.startId),
      description: readDescription(data.description),
    });
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
      return reply.send(tagJson(record));
    },
  );
}
