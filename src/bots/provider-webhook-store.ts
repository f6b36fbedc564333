import type { Selectable } from 'kysely';
import type { ProviderWebhookEventsTable, Tx } from '../db/schema.ts';

/**
 * R8/R9: every verified provider webhook, stored once by its id with what became of it (held for a
 * bot not yet attached, applied, stale…); src/bots/provider-webhooks.ts decides the outcome.
 */

/** Stores a webhook as received; false when its id was stored before (a redelivery). */
export async function storeProviderWebhook(
  trx: Tx,
  webhook: {
    id: string;
    event: string;
    botId: string | null;
    code: string | null;
    subCode: string | null;
    recordingId: string | null;
    workspaceId: string | null;
  },
): Promise<boolean> {
  const fresh = await trx
    .insertInto('provider_webhook_events')
    .values({
      id: webhook.id,
      event: webhook.event,
      bot_id: webhook.botId,
      code: webhook.code,
      sub_code: webhook.subCode,
      recording_id: webhook.recordingId,
      workspace_id: webhook.workspaceId,
      outcome: 'received',
    })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst();
  return fresh !== undefined;
}

export async function setWebhookOutcome(trx: Tx, webhookId: string, outcome: string): Promise<void> {
  await trx.updateTable('provider_webhook_events').set({ outcome }).where('id', '=', webhookId).execute();
}

/** The webhooks held for a bot, in the order they came, locked. */
export async function heldWebhooks(
  trx: Tx,
  botId: string,
): Promise<Array<Selectable<ProviderWebhookEventsTable>>> {
  return trx
    .selectFrom('provider_webhook_events')
    .selectAll()
    .where('bot_id', '=', botId)
    .where('outcome', '=', 'held')
    .orderBy('received_at')
    .orderBy('id')
    .forUpdate()
    .execute();
}
