/**
 * The one path for a message a consumer cannot use (ARCHITECTURE.md rule 6):
 * republished, payload untouched, with the reason in headers, then
 * terminated, so it is never retried and never silently dropped.
 *
 * - Scans go to `scans.dlq.<org_id>` (stream SCANS_DLQ, DECISIONS.md).
 * - Events a service consumes (CATALOG, TRACKING) go to
 *   `deadletter.<durable>` (stream DEAD_LETTERS), which names the consumer
 *   that refused them.
 *
 * The Nats-Msg-Id derives from the original message, so a redelivered
 * original does not dead-letter twice. When publishing fails the error is
 * thrown and nothing is terminated: the caller's batch is nak'ed and retried.
 */
import { headers as natsHeaders } from "@nats-io/transport-node";
import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { DLQ_DETAIL_HEADER, DLQ_REASON_HEADER, DLQ_SEQUENCE_HEADER, DLQ_SUBJECT_HEADER } from "./contracts/tracking.ts";
import { deadLetterSubject } from "./subjects.ts";

/** Header values: one line, bounded. */
const headerValue = (text: string) => text.replace(/[\r\n]+/g, " ").slice(0, 512);

export interface DeadLetter {
  /** Where it goes. */
  subject: string;
  msgId: string;
  /** The original message. */
  origin: { subject: string; seq: number; data: Uint8Array };
  reason: string;
  detail: string;
}

export async function publishDeadLetter(js: JetStreamClient, letter: DeadLetter): Promise<void> {
  const h = natsHeaders();
  h.set(DLQ_REASON_HEADER, letter.reason);
  h.set(DLQ_DETAIL_HEADER, headerValue(letter.detail || letter.reason));
  h.set(DLQ_SUBJECT_HEADER, headerValue(letter.origin.subject));
  h.set(DLQ_SEQUENCE_HEADER, String(letter.origin.seq));
  await js.publish(letter.subject, letter.origin.data, { headers: h, msgID: letter.msgId });
}

/** The one path for a message a consumer cannot use: onto its dead-letter stream with the reason, then terminated. */
export async function deadLetterAndTerm(js: JetStreamClient, letter: DeadLetter, msg: JsMsg): Promise<void> {
  await publishDeadLetter(js, letter);
  msg.term();
}

/** Why an event consumer refused a message. */
export type EventRefusal = "malformed_event" | "apply_failed" | "delivery_limit";

/** A consumed event this durable cannot use: onto DEAD_LETTERS with the reason, then terminated. */
export async function deadLetterEvent(js: JetStreamClient, durable: string, msg: JsMsg, reason: EventRefusal, detail: string): Promise<void> {
  await deadLetterAndTerm(
    js,
    {
      subject: deadLetterSubject(durable),
      msgId: `dl:${durable}:${msg.info.stream}:${msg.seq}`,
      origin: { subject: msg.subject, seq: msg.seq, data: msg.data },
      reason,
      detail,
    },
    msg,
  );
}
