/** Search text inside LIKE/ILIKE patterns (q: a case-insensitive substring, spec: list parameters). */

/** The text as a literal inside a LIKE pattern: the wildcards and the escape character escaped. */
export const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** A pattern matching any value containing `text`. */
export const containsPattern = (text: string) => `%${escapeLike(text)}%`;
