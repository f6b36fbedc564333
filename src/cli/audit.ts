import type { App } from '../app.ts';
import { listAudit } from '../workspaces/audit-store.ts';
import { UsageError } from './usage-error.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);

/**
 * U8: the audit trail, newest first: one workspace's (by name), or with no workspace the rows of
 * none (failed sign-ins for emails no account has, failed single sign-ons), for the operator.
 */
export async function auditCommand(
  app: App,
  opts: { workspace?: string; limit?: string; action?: string },
): Promise<number> {
  const limit = opts.limit === undefined ? 50 : Number(opts.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
    throw new UsageError('--limit must be a whole number from 1 to 10000');
  let workspaceId: string | null = null;
  if (opts.workspace !== undefined) {
    workspaceId = await app.workspaces.workspaceIdByName(opts.workspace);
    if (!workspaceId) throw new UsageError(`no workspace named "${opts.workspace}"`);
  }
  const events = await listAudit(app.database.db, {
    workspaceId,
    before: null,
    limit,
    action: opts.action ?? null,
  });
  out(
    'at                        action                      actor                              subject                                        address',
  );
  for (const e of events) {
    const actor = `${e.actor.kind}${e.actor.label ? ` ${e.actor.label}` : e.actor.userId ? ` ${e.actor.userId}` : e.actor.keyId ? ` key ${e.actor.keyId}` : ''}`;
    const subject = e.subject ? `${e.subject.type} ${e.subject.id}` : '-';
    out(
      [
        e.at.replace(/\.\d+Z$/, 'Z').padEnd(25),
        e.action.padEnd(27),
        actor.slice(0, 34).padEnd(34),
        subject.slice(0, 46).padEnd(46),
        e.address ?? '-',
        JSON.stringify(e.detail) === '{}' ? '' : JSON.stringify(e.detail),
      ].join(' '),
    );
  }
  if (events.length === 0)
    out(
      workspaceId
        ? '(nothing recorded)'
        : '(nothing recorded outside a workspace; name one with --workspace)',
    );
  return 0;
}
