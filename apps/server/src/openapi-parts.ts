import { ID_FORMATS } from "./id-formats";
import type { Param } from "./request-params";

export const idString = {
  type: "string",
  pattern: "^[0-9]{1,19}$",
  description: "A 64-bit id as a decimal string (never a JSON number: ids pass 2^53).",
  examples: ["1256557484213448722"],
};

export const errorBody = {
  type: "object",
  required: ["status", "code", "message"],
  properties: {
    status: { type: "integer", description: "The HTTP status, repeated." },
    code: {
      type: "string",
      description:
        "Stable code: INVALID_ARGUMENT, INVALID_ID, UNKNOWN_TAG, NOT_INITIALIZED, SEGMENTS_EXHAUSTED, TAG_EXHAUSTED, UNAVAILABLE, LEASE_LOST, CLOCK_BEHIND, CLOCK_MOVED_BACKWARDS, SEQUENCE_EXHAUSTED, CLOCK_SKEW, MODE_DISABLED, NOT_FOUND, METHOD_NOT_ALLOWED, UNAUTHORIZED, FORBIDDEN, ALREADY_EXISTS, BAD_REQUEST, SHUTTING_DOWN, INTERNAL, ...",
    },
    leafCode: {
      type: "integer",
      description: "Java Leaf's numeric code (-1 .. -4) where the condition has one.",
    },
    message: { type: "string", description: "What happened, the value seen and what to do." },
    details: { type: "object", additionalProperties: true },
  },
};

export const errors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      String(status),
      {
        description: ERROR_TEXT[status] ?? "Error",
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
      },
    ]),
  );

export const ERROR_TEXT: Record<number, string> = {
  400: "Bad input: the message names the parameter, the value seen and what is expected; an unknown query parameter is named, with the ones the route takes (INVALID_ARGUMENT).",
  401: "An access token is needed (per-tag tokens, or the admin token).",
  403: "The token is not valid here.",
  404: "Unknown tag (Leaf code -2), a disabled mode (MODE_DISABLED), or no such route.",
  409: "The tag exists already.",
  410: "The tag is used up: no range of its step fits below 2^63 - 1 (TAG_EXHAUSTED, Leaf code -3). Permanent: do not retry, move to a new tag.",
  503: "Not ready (Leaf code -1), both segments used up (-3), lease lost (-4), clock behind (-1/-3), Redis unavailable, or shutting down.",
};

/** Java Leaf's body: any content type, read and ignored (parameters come from the query string). */
export const anyBody = {
  required: false,
  description:
    "Any body of any content type (form fields, JSON, text, nothing): read and ignored, as Java Leaf's handlers ignore it. Parameters are read from the query string only.",
  content: { "*/*": { schema: {} } },
};

/**
 * The operations of one Java Leaf path: GET, and the same for POST, PUT, PATCH and DELETE, which
 * Spring's `@RequestMapping` without a method answers too. (No HEAD: it would take an id for
 * nothing.)
 */
export function javaOperations(get: { summary: string } & Record<string, unknown>) {
  const same = (method: string) => ({
    ...get,
    summary: `${get.summary}, by ${method} (as Java Leaf's @RequestMapping answers every method)`,
    requestBody: anyBody,
  });
  return {
    get,
    post: same("POST"),
    put: same("PUT"),
    patch: same("PATCH"),
    delete: same("DELETE"),
  };
}

export const json = (schema: unknown, description = "OK") => ({
  description,
  content: { "application/json": { schema } },
});
export const text = (description: string) => ({
  description,
  content: { "text/plain": { schema: { type: "string" } } },
});
/** An id of the JSON API's id routes: decimal, or in the string form `format` asked for. */
export const formattedId = {
  type: "string",
  description:
    "The id as a decimal string, or in the string form `format` asked for (the answer then has `format`).",
  examples: ["1256557484213448722", "2LMsBBgGSCe", "20200502121344602-0619-0018"],
};
export const formatName = {
  type: "string",
  description: "The string form of the ids, when `format` asked for one other than decimal.",
  enum: ID_FORMATS.filter((name) => name !== "decimal"),
};
export const formattedIds = {
  type: "object",
  required: ["count", "ids"],
  properties: {
    count: { type: "integer" },
    ids: { type: "array", items: formattedId },
    format: formatName,
  },
};
export const bearer = [{ adminToken: [] }];
export const tagRecord = {
  type: "object",
  properties: {
    tag: { type: "string" },
    maxId: idString,
    step: { type: "integer" },
    description: { type: ["string", "null"] },
    updatedAt: { type: ["string", "null"], format: "date-time" },
  },
};

/** A parameter as the document lists it. */
export function openApiParam({ name, in: where, required, description, schema }: Param) {
  return { name, in: where, required: where === "path" || required === true, description, schema };
}
