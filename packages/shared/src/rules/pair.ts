/**
 * Filter rule 1 (spec: filters): the two forms of one reference (location_id
 * with location_external_key, parent_id with parent_external_key, asset_id
 * with asset_external_key) are mutually exclusive; both given is 400
 * ambiguous_fields with one fields[] entry per parameter.
 */
import type { QueryReader } from "../validation.ts";

export function exclusivePair(reader: QueryReader, idName: string, keyName: string): void {
  if (!reader.has(idName) || !reader.has(keyName)) return;
  for (const name of [idName, keyName]) {
    const other = name === idName ? keyName : idName;
    reader.fail(name, "ambiguous_fields", `${name} and ${other} are mutually exclusive; send only one`, {
      conflicts_with: other,
    });
  }
}
