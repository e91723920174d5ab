/**
 * Dead letters: a refused scan is republished, payload untouched, on
 * `scans.dlq.<org_id>` (stream SCANS_DLQ) with the reason in a header. The
 * Nats-Msg-Id is derived from the original message, so a redelivered original
 * does not dead-letter twice.
 */
import { headers as natsHeaders } from "@nats-io/transport-node";
import type { JetStreamClient } from "@nats-io/jetstream";
import {
  DLQ_DETAIL_HEADER,
  DLQ_REASON_HEADER,
  DLQ_SEQUENCE_HEADER,
  DLQ_SUBJECT_HEADER,
  scanDlqSubject,
  type DlqReason,
} from "@whereabouts/shared";
import type { ScanMessage } from "./scan-parser.ts";

/** Header values: one line, bounded. */
const headerValue = (text: string) => text.replace(/[\r\n]+/g, " ").slice(0, 512);

export async function deadLetter(
  js: JetStreamClient,
  msg: ScanMessage,
  refusal: { org: string; reason: DlqReason; detail: string },
): Promise<void> {
  const h = natsHeaders();
  h.set(DLQ_REASON_HEADER, refusal.reason);
  h.set(DLQ_DETAIL_HEADER, headerValue(refusal.detail || refusal.reason));
  h.set(DLQ_SUBJECT_HEADER, headerValue(msg.subject));
  h.set(DLQ_SEQUENCE_HEADER, String(msg.seq));
  await js.publish(scanDlqSubject(refusal.org), msg.data, {
    headers: h,
    msgID: `dlq:${msg.seq}:${msg.timestampNanos}`,
  });
}
