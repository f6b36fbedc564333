import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';

/**
 * U5: the rows of share links (read-only links to one meeting). A link is stored as the hash of
 * its token; its meeting's owner or an admin makes, lists and revokes it. Applies; decides nothing.
 */

export interface ShareLinkView {
  id: string;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
  opens: number;
  lastOpenedAt: string | null;
  createdBy: string | null;
}

/** What opening a link needs: the meeting and workspace it shows, when it is still good. */
export interface OpenableLink {
  id: string;
  workspaceId: string;
  meetingId: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export async function createShareLink(
  trx: Tx,
  link: {
    workspaceId: string;
    meetingId: string;
    tokenHash: string;
    createdBy: string | null;
    ttlMs: number;
  },
): Promise<ShareLinkView> {
  const row = await trx
    .insertInto('share_links')
    .values({
      id: randomUUID(),
      token_hash: link.tokenHash,
      workspace_id: link.workspaceId,
      meeting_id: link.meetingId,
      created_by: link.createdBy,
      expires_at: sql<Date>`now() + ${link.ttlMs} * interval '1 millisecond'`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return viewOf(row);
}

export async function listShareLinks(
  trx: Tx,
  workspaceId: string,
  meetingId: string,
): Promise<ShareLinkView[]> {
  const rows = await trx
    .selectFrom('share_links')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('meeting_id', '=', meetingId)
    .orderBy('created_at', 'desc')
    .execute();
  return rows.map(viewOf);
}

/** Revokes a link of the meeting; false when the meeting has no such link. */
export async function revokeShareLink(
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  linkId: string,
): Promise<boolean> {
  const result = await trx
    .updateTable('share_links')
    .set({ revoked_at: sql<Date>`coalesce(revoked_at, now())` })
    .where('workspace_id', '=', workspaceId)
    .where('meeting_id', '=', meetingId)
    .where('id', '=', linkId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * The link of a token's hash, when it is neither revoked nor expired and whoever made it is still a
 * member who may change meetings (a link does not outlive its maker's removal or demotion to
 * viewer). The system path: no workspace yet.
 */
export async function openableShareLink(db: Db, tokenHash: string): Promise<OpenableLink | null> {
  const row = await db
    .selectFrom('share_links as s')
    .select(['s.id', 's.workspace_id', 's.meeting_id'])
    .where('s.token_hash', '=', tokenHash)
    .where('s.revoked_at', 'is', null)
    .where('s.expires_at', '>', sql<Date>`now()`)
    .where((eb) =>
      eb.or([
        eb('s.created_by', 'is', null),
        eb.exists(
          eb
            .selectFrom('memberships as m')
            .select('m.user_id')
            .whereRef('m.user_id', '=', 's.created_by')
            .whereRef('m.workspace_id', '=', 's.workspace_id')
            .where('m.role', '<>', 'viewer'),
        ),
      ]),
    )
    .executeTakeFirst();
  return row ? { id: row.id, workspaceId: row.workspace_id, meetingId: row.meeting_id } : null;
}

/** Counts an opening of the link (for its owner's list and the audit); returns when it expires. */
export async function noteShareLinkOpened(trx: Tx, linkId: string): Promise<Date> {
  const row = await trx
    .updateTable('share_links')
    .set({ opens: sql<number>`opens + 1`, last_opened_at: sql<Date>`now()` })
    .where('id', '=', linkId)
    .returning('expires_at')
    .executeTakeFirstOrThrow();
  return row.expires_at;
}

function viewOf(row: {
  id: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  opens: number;
  last_opened_at: Date | null;
  created_by: string | null;
}): ShareLinkView {
  return {
    id: row.id,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    revokedAt: iso(row.revoked_at),
    opens: row.opens,
    lastOpenedAt: iso(row.last_opened_at),
    createdBy: row.created_by,
  };
}
