/**
 * The external_key value rules (spec: Identifiers): one checker, its zod form
 * for bodies, and the repeatable list filter (commas rejected, spec: list
 * parameters). Catalog and reporting both read filters through here.
 */
import { z } from "zod";
import type { QueryReader } from "../validation.ts";

export const EXTERNAL_KEY_MAX = 255;
export const EXTERNAL_KEY_PATTERN = /^[A-Za-z0-9-]+$/;

export interface ValueProblem {
  code: "too_short" | "too_long" | "invalid_value";
  message: string;
  params?: Record<string, unknown>;
}

/** The external_key value rules; `field` names the key, body field or filter. */
export function externalKeyProblem(field: string, value: string): ValueProblem | undefined {
  if (value.trim() === "") {
    return { code: "too_short", message: `${field} must not be empty or whitespace`, params: { min_length: 1 } };
  }
  if (value.length > EXTERNAL_KEY_MAX) {
    return {
      code: "too_long",
      message: `${field} must be at most ${EXTERNAL_KEY_MAX} characters`,
      params: { max_length: EXTERNAL_KEY_MAX },
    };
  }
  if (!EXTERNAL_KEY_PATTERN.test(value)) {
    return {
      code: "invalid_value",
      message: `${field} may contain only ASCII letters, digits and hyphens`,
      params: { pattern: EXTERNAL_KEY_PATTERN.source },
    };
  }
  return undefined;
}

type Ctx = z.core.$RefinementCtx<string>;

function addProblem(ctx: Ctx, problem: ValueProblem): void {
  if (problem.code === "too_short") {
    ctx.addIssue({ code: "too_small", origin: "string", minimum: 1, inclusive: true, message: problem.message });
  } else if (problem.code === "too_long") {
    ctx.addIssue({ code: "too_big", origin: "string", maximum: EXTERNAL_KEY_MAX, inclusive: true, message: problem.message });
  } else {
    ctx.addIssue({ code: "custom", message: problem.message });
  }
}

export const externalKey = (field: string) =>
  z
    .string()
    .superRefine((value, ctx) => {
      const problem = externalKeyProblem(field, value);
      if (problem) addProblem(ctx, problem);
    })
    .meta({ minLength: 1, maxLength: EXTERNAL_KEY_MAX, pattern: EXTERNAL_KEY_PATTERN.source });

/** Repeatable external-key filter: every value checked, commas rejected; the values that pass. */
export function readKeyFilter(reader: QueryReader, name: string): string[] {
  const out: string[] = [];
  for (const value of reader.many(name)) {
    if (value.includes(",")) {
      reader.fail(name, "invalid_value", `${name} must not contain commas; repeat the parameter to match several keys`);
      continue;
    }
    const problem = externalKeyProblem(name, value);
    if (problem) reader.fail(name, problem.code, problem.message, problem.params);
    else out.push(value);
  }
  return out;
}
