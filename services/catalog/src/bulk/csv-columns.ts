/**
 * The asset CSV of bulk upload and export (EXTENSIONS.md section 3): its
 * columns, a row to the JSON body the API's own rules (AssetCreateRequest,
 * AssetPatchRequest) check, and an asset back to a row. Import and export use
 * this one mapping, so an exported file re-imports as unchanged.
 */
import type { AssetView, FieldError } from "@whereabouts/shared";

export const CSV_COLUMNS = ["external_key", "name", "description", "is_active", "valid_from", "valid_to", "metadata", "tags"] as const;
export type CsvColumn = (typeof CSV_COLUMNS)[number];

export const TAG_SEPARATOR = "|";

/** The header's problems: unknown columns, a missing `name`, a column twice. */
export function checkHeader(header: string[]): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  for (const column of header) {
    if (!(CSV_COLUMNS as readonly string[]).includes(column)) {
      errors.push({ field: column, code: "unknown_field", message: `${column} is not a known column; known: ${CSV_COLUMNS.join(", ")}` });
    } else if (seen.has(column)) {
      errors.push({ field: column, code: "invalid_value", message: `${column} appears twice in the header` });
    }
    seen.add(column);
  }
  if (!seen.has("name")) errors.push({ field: "name", code: "required", message: "the name column is required" });
  return errors;
}

export interface RowBody {
  /** The body as POST /api/v1/assets takes it (tags included). */
  body: Record<string, unknown>;
  /** Problems of the text itself (metadata not JSON, a malformed tag item), by field. */
  errors: FieldError[];
}

/**
 * A row's cells as a request body. Empty cells: `description` and `valid_to`
 * null, the others absent (their defaults on create, unchanged on update).
 */
export function rowToBody(header: string[], cells: string[]): RowBody {
  const body: Record<string, unknown> = {};
  const errors: FieldError[] = [];
  header.forEach((column, i) => {
    const text = cells[i] ?? "";
    switch (column as CsvColumn) {
      case "external_key":
      case "name":
        if (text !== "" || column === "name") body[column] = text;
        break;
      case "description":
        body.description = text === "" ? null : text;
        break;
      case "valid_to":
        body.valid_to = text === "" ? null : text;
        break;
      case "valid_from":
        if (text !== "") body.valid_from = text;
        break;
      case "is_active":
        if (text === "") break;
        if (text === "true" || text === "false") body.is_active = text === "true";
        else errors.push({ field: "is_active", code: "invalid_value", message: "is_active must be true or false" });
        break;
      case "metadata":
        if (text === "") break;
        try {
          body.metadata = JSON.parse(text);
        } catch {
          errors.push({ field: "metadata", code: "invalid_value", message: "metadata must be a JSON object" });
        }
        break;
      case "tags": {
        if (text === "") break;
        const tags: Array<{ tag_type: string; value: string }> = [];
        for (const item of text.split(TAG_SEPARATOR)) {
          const colon = item.indexOf(":");
          if (colon <= 0) {
            errors.push({ field: "tags", code: "invalid_value", message: `tag '${item}' must be <tag_type>:<value>` });
            continue;
          }
          tags.push({ tag_type: item.slice(0, colon), value: item.slice(colon + 1) });
        }
        body.tags = tags;
        break;
      }
    }
  });
  return { body, errors };
}

/** RFC 4180 quoting: only when needed. */
function cell(text: string): string {
  return /[",\r\n]/.test(text) || /^\s|\s$/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export const csvHeaderLine = () => `${CSV_COLUMNS.join(",")}\r\n`;

/** One asset as a CSV line, in CSV_COLUMNS order. */
export function assetToCsvLine(asset: AssetView): string {
  const values: Record<CsvColumn, string> = {
    external_key: asset.external_key,
    name: asset.name,
    description: asset.description ?? "",
    is_active: String(asset.is_active),
    valid_from: asset.valid_from,
    valid_to: asset.valid_to ?? "",
    metadata: JSON.stringify(asset.metadata ?? {}),
    tags: (asset.tags ?? []).map((t) => `${t.tag_type}:${t.value}`).join(TAG_SEPARATOR),
  };
  return `${CSV_COLUMNS.map((c) => cell(values[c])).join(",")}\r\n`;
}
