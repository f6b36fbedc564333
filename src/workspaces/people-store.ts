import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Executor, Tx } from '../db/schema.ts';
import type { Role } from '../domain/roles.ts';

/**
 * U1–U3: the rows of people: users, their memberships, sessions, the per-email sign-in throttle and
 * access links (setup and invites). Applies what src/workspaces/sign-in.ts and the member routes
 * decide; decides nothing. Every method takes the workspace it acts in where rows have one.
 */

export interface UserRow {
  id: string;
  email: string;
  name: string;
  password_hash: string | null;
  disabled_at: Date | null;
}

export interface MemberView {
  userId: string;
  email: string;
  name: string;
  role: Role;
  joinedAt: string;
}

/** A live session with what a request needs of it, read in one statement. */
export interface SessionGrant {
  sessionId: string;
  userId: string;
  workspaceId: string;
  role: Role;
  expiresAt: Date;
  lastSeenAt: Date;
  now: Date;
}

export interface LinkRow {
  id: string;
  kind: string;
  workspace_id: string;
  role: string;
  expires_at: Date;
  used_at: Date | null;
}

export class PgPeopleStore {
  constructor(private readonly db: Db) {}

  transaction<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(fn);
  }

  async userByEmail(email: string, db: Executor = this.db): Promise<UserRow | null> {
    const row = await db
      .selectFrom('users')
      .select(['id', 'email', 'name', 'password_hash', 'disabled_at'])
      .where('email', '=', email)
      .executeTakeFirst();
    return row ?? null;
  }

  async userById(id: string, db: Executor = this.db): Promise<UserRow | null> {
    const row = await db
      .selectFrom('users')
      .select(['id', 'email', 'name', 'password_hash', 'disabled_at'])
      .where('id', '=', id)
      .executeTakeFirst();
    return row ?? null;
  }

  async createUser(
    trx: Tx,
    user: { email: string; name: string; passwordHash: string | null },
  ): Promise<string> {
    const id = randomUUID();
    await trx
      .insertInto('users')
      .values({ id, email: user.email, name: user.name, password_hash: user.passwordHash })
      .execute();
    return id;
  }

  async setPassword(trx: Tx, userId: string, passwordHash: string): Promise<void> {
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', userId).execute();
  }

  async roleOf(workspaceId: string, userId: string, db: Executor = this.db): Promise<Role | null> {
    const row = await db
      .selectFrom('memberships')
      .select('role')
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return (row?.role as Role | undefined) ?? null;
  }

  /** The workspaces a user belongs to, oldest membership first. */
  async workspacesOf(
    userId: string,
    db: Executor = this.db,
  ): Promise<Array<{ id: string; name: string; role: Role }>> {
    const rows = await db
      .selectFrom('memberships as m')
      .innerJoin('workspaces as w', 'w.id', 'm.workspace_id')
      .select(['w.id', 'w.name', 'm.role'])
      .where('m.user_id', '=', userId)
      .orderBy('m.created_at')
      .execute();
    return rows.map((r) => ({ id: r.id, name: r.name, role: r.role as Role }));
  }

  /** Adds a member, or sets the role of one already there. */
  async putMembership(trx: Tx, workspaceId: string, userId: string, role: Role): Promise<void> {
    await trx
      .insertInto('memberships')
      .values({ workspace_id: workspaceId, user_id: userId, role })
      .onConflict((oc) => oc.columns(['workspace_id', 'user_id']).doUpdateSet({ role }))
      .execute();
  }

  async removeMembership(trx: Tx, workspaceId: string, userId: string): Promise<boolean> {
    const result = await trx
      .deleteFrom('memberships')
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) === 1;
  }

  /** Locks the workspace's memberships (its row), so owner counts cannot race. */
  async lockWorkspace(trx: Tx, workspaceId: string): Promise<void> {
    await trx.selectFrom('workspaces').select('id').where('id', '=', workspaceId).forUpdate().execute();
  }

  async countRole(trx: Tx, workspaceId: string, role: Role): Promise<number> {
    const row = await trx
      .selectFrom('memberships')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('workspace_id', '=', workspaceId)
      .where('role', '=', role)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async listMembers(workspaceId: string, db: Executor = this.db): Promise<MemberView[]> {
    const rows = await db
      .selectFrom('memberships as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select(['u.id', 'u.email', 'u.name', 'm.role', 'm.created_at'])
      .where('m.workspace_id', '=', workspaceId)
      .orderBy('m.created_at')
      .orderBy('u.id')
      .execute();
    return rows.map((r) => ({
      userId: r.id,
      email: r.email,
      name: r.name,
      role: r.role as Role,
      joinedAt: r.created_at.toISOString(),
    }));
  }

  async anyOwner(): Promise<boolean> {
    const row = await this.db
      .selectFrom('memberships')
      .select('user_id')
      .where('role', '=', 'owner')
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  // Sessions.

  async createSession(
    trx: Tx,
    session: { idHash: string; userId: string; workspaceId: string; maxMs: number; address: string | null },
  ): Promise<{ id: string; expiresAt: Date }> {
    const id = randomUUID();
    const row = await trx
      .insertInto('sessions')
      .values({
        id,
        id_hash: session.idHash,
        user_id: session.userId,
        workspace_id: session.workspaceId,
        expires_at: sql<Date>`now() + ${`${session.maxMs} milliseconds`}::interval`,
        address: session.address,
      })
      .returning('expires_at')
      .executeTakeFirstOrThrow();
    return { id, expiresAt: row.expires_at };
  }

  /**
   * The session of a secret's hash with its holder's role now (a demotion or removal counts at the
   * next request), or null when there is none, it was revoked, its user was disabled or is no
   * longer a member. Expiry is the caller's decision, on the times returned.
   */
  async sessionGrant(idHash: string): Promise<SessionGrant | null> {
    const row = await this.db
      .selectFrom('sessions as s')
      .innerJoin('users as u', 'u.id', 's.user_id')
      .innerJoin('memberships as m', (join) =>
        join.onRef('m.user_id', '=', 's.user_id').onRef('m.workspace_id', '=', 's.workspace_id'),
      )
      .select([
        's.id',
        's.user_id',
        's.workspace_id',
        'm.role',
        's.expires_at',
        's.last_seen_at',
        sql<Date>`now()`.as('now'),
      ])
      .where('s.id_hash', '=', idHash)
      .where('s.revoked_at', 'is', null)
      .where('u.disabled_at', 'is', null)
      .executeTakeFirst();
    if (!row) return null;
    return {
      sessionId: row.id,
      userId: row.user_id,
      workspaceId: row.workspace_id,
      role: row.role as Role,
      expiresAt: row.expires_at,
      lastSeenAt: row.last_seen_at,
      now: row.now,
    };
  }

  async touchSession(sessionId: string): Promise<void> {
    await this.db
      .updateTable('sessions')
      .set({ last_seen_at: sql<Date>`now()` })
      .where('id', '=', sessionId)
      .execute();
  }

  async moveSession(sessionId: string, workspaceId: string): Promise<void> {
    await this.db
      .updateTable('sessions')
      .set({ workspace_id: workspaceId })
      .where('id', '=', sessionId)
      .where('revoked_at', 'is', null)
      .execute();
  }

  async revokeSession(sessionId: string): Promise<void> {
    await this.db
      .updateTable('sessions')
      .set({ revoked_at: sql<Date>`now()` })
      .where('id', '=', sessionId)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /** Every live session of a user (sign out everywhere, removal); in one workspace when given. */
  async revokeUserSessions(userId: string, workspaceId?: string, db: Executor = this.db): Promise<number> {
    const result = await db
      .updateTable('sessions')
      .set({ revoked_at: sql<Date>`now()` })
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .$if(workspaceId !== undefined, (q) => q.where('workspace_id', '=', workspaceId!))
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  // The sign-in throttle, per email.

  /**
   * Counts an attempt before its password is checked, in one transaction, so parallel guesses each
   * take a place: the attempt's number among the failures (a day of quiet starts again at 1), the
   * seconds the key is still locked for (an attempt during a lock changes nothing), and whether it
   * is the first attempt after a lock ran out (which clears the lock: that one attempt is checked).
   */
  async countAttempt(key: string): Promise<{ attempt: number; lockedSeconds: number; afterLock: boolean }> {
    return this.db.transaction().execute(async (trx) => {
      // The key's row locked first: attempts arriving together take their turns, so only the
      // first after a lock ran out sees it run out.
      const old = await sql<{ lapsed: boolean }>`
        select locked_until <= now() as lapsed from sign_in_throttle where key = ${key} for update`.execute(
        trx,
      );
      const row = await sql<{ failures: number; s: number | null }>`
        insert into sign_in_throttle as t (key, failures, updated_at) values (${key}, 1, now())
        on conflict (key) do update
          set failures = case when t.locked_until > now() then t.failures
                              when t.updated_at < now() - interval '1 day' then 1
                              else t.failures + 1 end,
              locked_until = case when t.locked_until <= now() then null else t.locked_until end,
              updated_at = case when t.locked_until > now() then t.updated_at else now() end
        returning t.failures, extract(epoch from (t.locked_until - now()))::float8 as s`.execute(trx);
      const r = row.rows[0]!;
      return {
        attempt: Number(r.failures),
        lockedSeconds: Math.max(0, r.s ?? 0),
        afterLock: old.rows[0]?.lapsed === true,
      };
    });
  }

  /** Locks the key for `ms` from now. */
  async lockFor(key: string, ms: number): Promise<void> {
    await sql`update sign_in_throttle set locked_until = now() + ${`${ms} milliseconds`}::interval
      where key = ${key}`.execute(this.db);
  }

  async clearFailures(key: string): Promise<void> {
    await this.db.deleteFrom('sign_in_throttle').where('key', '=', key).execute();
  }

  // Access links.

  async createLink(
    link: {
      tokenHash: string;
      kind: 'setup' | 'invite';
      workspaceId: string;
      role: Role;
      createdBy: string | null;
      ttlMs: number;
    },
    db: Executor = this.db,
  ): Promise<{ id: string; expiresAt: Date }> {
    const id = randomUUID();
    const row = await db
      .insertInto('access_links')
      .values({
        id,
        token_hash: link.tokenHash,
        kind: link.kind,
        workspace_id: link.workspaceId,
        role: link.role,
        created_by: link.createdBy,
        expires_at: sql<Date>`now() + ${`${link.ttlMs} milliseconds`}::interval`,
      })
      .returning('expires_at')
      .executeTakeFirstOrThrow();
    return { id, expiresAt: row.expires_at };
  }

  async usableLinkExists(tokenHash: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('access_links')
      .select('id')
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', sql<Date>`now()`)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The unused, unexpired link of a token's hash, locked for its redemption. */
  async lockUsableLink(trx: Tx, tokenHash: string): Promise<LinkRow | null> {
    const row = await trx
      .selectFrom('access_links')
      .select(['id', 'kind', 'workspace_id', 'role', 'expires_at', 'used_at'])
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', sql<Date>`now()`)
      .forUpdate()
      .executeTakeFirst();
    return row ?? null;
  }

  async markLinkUsed(trx: Tx, linkId: string, userId: string): Promise<void> {
    await trx
      .updateTable('access_links')
      .set({ used_at: sql<Date>`now()`, used_by: userId })
      .where('id', '=', linkId)
      .execute();
  }

  /** Unused setup links are void once an owner exists or a new one is made. */
  async voidSetupLinks(db: Executor): Promise<void> {
    await db
      .updateTable('access_links')
      .set({ expires_at: sql<Date>`now()` })
      .where('kind', '=', 'setup')
      .where('used_at', 'is', null)
      .where('expires_at', '>', sql<Date>`now()`)
      .execute();
  }

  // Single sign-on (U2).

  /** The user an identity at a provider belongs to. */
  async userByIdentity(issuer: string, subject: string): Promise<UserRow | null> {
    const row = await this.db
      .selectFrom('user_identities as i')
      .innerJoin('users as u', 'u.id', 'i.user_id')
      .select(['u.id', 'u.email', 'u.name', 'u.password_hash', 'u.disabled_at'])
      .where('i.issuer', '=', issuer)
      .where('i.subject', '=', subject)
      .executeTakeFirst();
    return row ?? null;
  }

  /** Ties an identity to a user (once: a second tie of the same identity keeps the first). */
  async linkIdentity(
    trx: Tx,
    identity: { issuer: string; subject: string; userId: string; email: string | null },
  ): Promise<void> {
    await trx
      .insertInto('user_identities')
      .values({
        issuer: identity.issuer,
        subject: identity.subject,
        user_id: identity.userId,
        email: identity.email,
      })
      .onConflict((oc) => oc.columns(['issuer', 'subject']).doUpdateSet({ last_used_at: sql<Date>`now()` }))
      .execute();
  }

  /** A sign-in in flight, until the provider sends the browser back. */
  async createSsoFlow(flow: {
    stateHash: string;
    codeVerifier: string;
    nonce: string;
    returnTo: string;
    ttlMs: number;
  }): Promise<void> {
    await this.db
      .deleteFrom('sso_flows')
      .where('expires_at', '<', sql<Date>`now()`)
      .execute();
    await this.db
      .insertInto('sso_flows')
      .values({
        state_hash: flow.stateHash,
        code_verifier: flow.codeVerifier,
        nonce: flow.nonce,
        return_to: flow.returnTo,
        expires_at: sql<Date>`now() + ${flow.ttlMs} * interval '1 millisecond'`,
      })
      .execute();
  }

  /** Takes (deletes) a sign-in in flight by its state's hash: used once, null when unknown or expired. */
  async takeSsoFlow(
    stateHash: string,
  ): Promise<{ codeVerifier: string; nonce: string; returnTo: string } | null> {
    const row = await this.db
      .deleteFrom('sso_flows')
      .where('state_hash', '=', stateHash)
      .returning(['code_verifier', 'nonce', 'return_to', sql<boolean>`expires_at > now()`.as('live')])
      .executeTakeFirst();
    if (!row?.live) return null;
    return { codeVerifier: row.code_verifier, nonce: row.nonce, returnTo: row.return_to };
  }

  /** The installation's oldest workspace (where a first sign-in lands unless a setting names one). */
  async oldestWorkspaceId(): Promise<string | null> {
    const row = await this.db
      .selectFrom('workspaces')
      .select('id')
      .orderBy('created_at')
      .orderBy('id')
      .limit(1)
      .executeTakeFirst();
    return row?.id ?? null;
  }
}
