import { ulid } from "ulid";

/** Request ids are ULIDs: sortable, and unique across gateway replicas. */
export const newRequestId = (): string => ulid();
