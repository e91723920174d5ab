/**
 * Dead letters of scans: a refused scan is republished, payload untouched, on
 * `scans.dlq.<org_id>` (stream SCANS_DLQ) with the reason in a header, then
 * terminated, by the one dead-letter path of packages/shared (dead-letter.ts).
 */
import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { deadLetterAndTerm, scanDlqSubject, type DlqReason } from "@whereabouts/shared";

export async function deadLetter(js: JetStreamClient, msg: JsMsg, refusal: { org: string; reason: DlqReason; detail: string }): Promise<void> {
  await deadLetterAndTerm(
    js,
    {
      subject: scanDlqSubject(refusal.org),
      // A redelivered original does not dead-letter twice.
      msgId: `dlq:${msg.seq}:${msg.timestampNanos}`,
      origin: { subject: msg.subject, seq: msg.seq, data: msg.data },
      reason: refusal.reason,
      detail: refusal.detail,
    },
    msg,
  );
}
