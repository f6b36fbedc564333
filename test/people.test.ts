// Issue 36: people, roles, sessions and scoped keys (U1, U2, U3, U6), through the API.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ROUTE_ACTIONS } from '../src/api/authorize.ts';
import { ACTIONS, decide, ROLE_TABLE, ROLES, SCOPES, type Role } from '../src/domain/roles.ts';
import { createSetupLink } from '../src/workspaces/sign-in.ts';
import { sql } from 'kysely';
import {
  SPEECH,
  speechWav,
  startHarness,
  supervise,
  waitFor,
  spawnVerbatim,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

interface Session {
  cookie: string;
  csrf: string;
  userId: string;
}

const PASSWORD = 'correct horse battery';

async function redeem(h: Harness, token: string, email: string): Promise<Session> {
  const res = await h.api.inject({
    method: 'POST',
    url: '/v1/auth/links/redeem',
    payload: { token, email, name: email.split('@')[0], password: PASSWORD },
  });
  assert.equal(res.statusCode, 200, res.body);
  return sessionOf(res);
}

function sessionOf(res: {
  json(): { csrfToken: string; user: { id: string } };
  headers: Record<string, unknown>;
}): Session {
  const setCookie = String(res.headers['set-cookie']);
  const cookie = /verbatim_session=([^;]+)/.exec(setCookie)?.[1];
  assert.ok(cookie, 'a session cookie was set');
  assert.match(setCookie, /HttpOnly/i);
  assert.match(setCookie, /SameSite=Lax/i);
  return { cookie: `verbatim_session=${cookie}`, csrf: res.json().csrfToken, userId: res.json().user.id };
}

function as(s: Session, csrf = true): Record<string, string> {
  return { authorization: '', cookie: s.cookie, ...(csrf ? { 'x-csrf-token': s.csrf } : {}) };
}

async function signIn(h: Harness, email: string, password = PASSWORD) {
  return h.api.inject({ method: 'POST', url: '/v1/auth/sign-in', payload: { email, password } });
}

/** A request for each route, with ids nobody has: the handler answers 4xx, never 403, when allowed. */
function probe(route: string): { method: string; url: string; body?: unknown } {
  const [method, path] = route.split(' ') as [string, string];
  const url = path
    .replace(':id', randomUUID())
    .replace(':seq', '0')
    .replace(':speakerId', randomUUID())
    .replace(':userId', randomUUID())
    .replace(':linkId', randomUUID());
  const body =
    method === 'GET' || method === 'DELETE'
      ? undefined
      : route.endsWith('/invites')
        ? { role: 'viewer' }
        : {};
  return { method, url, body };
}

void describe('people (issue 36)', () => {
  let h: Harness;
  const sessions = {} as Record<Role, Session>;

  before(async () => {
    h = await startHarness();
    const setup = await createSetupLink(h.app.people, h.workspaceId);
    sessions.owner = await redeem(h, setup.token, 'owner@example.com');
    for (const role of ['admin', 'member', 'viewer'] as const) {
      const invite = await h.request('POST', '/v1/invites', { role }, as(sessions.owner));
      assert.equal(invite.status, 201, invite.text);
      sessions[role] = await redeem(h, invite.json.token, `${role}@example.com`);
    }
  });
  after(() => h.close());

  void it('U1: the role table is whole, and every /v1 route names an action', async () => {
    for (const role of ROLES)
      for (const action of ACTIONS) assert.equal(typeof ROLE_TABLE[role][action], 'boolean');
    // The server refuses to start with a route missing from ROUTE_ACTIONS; and the table names no
    // route the API does not have: the two lists are the same.
    const doc = (await h.api.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, unknown>>;
    }>();
    const served = Object.entries(doc.paths)
      .filter(
        ([path]) =>
          path.startsWith('/v1/') && !path.startsWith('/v1/auth/') && !path.startsWith('/v1/shared/'),
      )
      .flatMap(([path, ops]) =>
        Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
      )
      .sort();
    assert.deepEqual(served, Object.keys(ROUTE_ACTIONS).sort());
  });

  void it('U1: every role × route through the API gets the table’s answer (403 auth.forbidden, or the handler’s)', async () => {
    for (const role of ROLES) {
      for (const [route, action] of Object.entries(ROUTE_ACTIONS)) {
        if (route === 'GET /v1/meetings/:id/events') continue; // a stream; its 404 comes first either way
        const { method, url, body } = probe(route);
        const res = await h.request(method, url, body, as(sessions[role]));
        const allowed = ROLE_TABLE[role][action];
        if (allowed) {
          assert.notEqual(res.status, 401, `${role} ${route}: ${res.text}`);
          assert.ok(
            res.status !== 403 || res.json?.error?.code !== 'auth.forbidden',
            `${role} ${route}: ${res.text}`,
          );
        } else {
          assert.equal(res.status, 403, `${role} ${route}: ${res.text}`);
          assert.equal(res.json.error.code, 'auth.forbidden');
          assert.match(res.json.error.message, new RegExp(`the ${role} role may not`));
        }
      }
    }
  });

  void it('U3: a cookie-authenticated write without its CSRF token is refused; a read is not', async () => {
    const read = await h.request('GET', '/v1/meetings', undefined, as(sessions.member, false));
    assert.equal(read.status, 200);
    const write = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'x' },
      as(sessions.member, false),
    );
    assert.equal(write.status, 403);
    assert.equal(write.json.error.code, 'auth.csrf');
    const wrong = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'x' },
      {
        ...as(sessions.member, false),
        'x-csrf-token': 'not-it',
      },
    );
    assert.equal(wrong.json.error.code, 'auth.csrf');
    const right = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'x' },
      as(sessions.member),
    );
    assert.equal(right.status, 201, right.text);
  });

  void it('U2: wrong passwords lock an email out (429 with Retry-After), known or not, with the same answers; the right one then waits too', async () => {
    for (const email of ['viewer@example.com', 'nobody@example.com']) {
      const answers: number[] = [];
      for (let i = 0; i < 5; i++) answers.push((await signIn(h, email, 'wrong password!')).statusCode);
      assert.deepEqual(answers, [401, 401, 401, 401, 429], email);
      const locked = await signIn(h, email, PASSWORD);
      assert.equal(locked.statusCode, 429);
      assert.equal(locked.json().error.code, 'auth.locked');
      assert.ok(Number(locked.headers['retry-after']) > 0);
    }
    // The lock is per email: another member signs in.
    const ok = await signIn(h, 'member@example.com');
    assert.equal(ok.statusCode, 200);
    assert.doesNotMatch(ok.body, /vbs_/, 'the session secret is only in the cookie');
    assert.doesNotMatch(h.logs(), /vbs_[A-Za-z0-9_-]{20}/, 'no session secret in the logs');
  });

  void it('U4: a bot belongs to whoever asked for it: a member stops or cancels only their own bot, and does not see one whose meeting is private to another; a feed is its subscriber’s; a batch is its maker’s', async () => {
    const start = new Date(Date.now() + 3_600_000);
    const event = {
      title: 'Member’s call',
      start: start.toISOString(),
      end: new Date(start.getTime() + 1_800_000).toISOString(),
      meetingUrl: 'https://meet.google.com/own-bots-one',
    };
    const posted = await h.request('POST', '/v1/calendar-events', event, as(sessions.member));
    assert.equal(posted.status, 201, posted.text);
    const id = posted.json.recording.id as string;
    const ownerOf = async (table: 'bot_recordings' | 'calendar_feeds', rowId: string) =>
      (
        await h.db
          .owner()
          .selectFrom(table)
          .select('owner_user_id')
          .where('id', '=', rowId)
          .executeTakeFirstOrThrow()
      ).owner_user_id;
    assert.equal(await ownerOf('bot_recordings', id), sessions.member.userId);

    const invite = await h.request('POST', '/v1/invites', { role: 'member' }, as(sessions.owner));
    const other = await redeem(h, invite.json.token, 'member-bots@example.com');
    for (const verb of ['stop', 'cancel']) {
      const refused = await h.request('POST', `/v1/bot-recordings/${id}/${verb}`, {}, as(other));
      assert.equal(refused.status, 403, refused.text);
      assert.match(refused.json.error.message, /only the person who asked for this bot, or an admin/);
    }
    const canceled = await h.request('POST', `/v1/bot-recordings/${id}/cancel`, {}, as(sessions.member));
    assert.equal(canceled.status, 202, canceled.text);
    assert.equal(canceled.json.status, 'canceled');
    // An admin manages every bot, its own or not.
    const second = await h.request(
      'POST',
      '/v1/calendar-events',
      { ...event, meetingUrl: 'https://meet.google.com/own-bots-two' },
      as(other),
    );
    assert.equal(second.status, 201, second.text);
    const byAdmin = await h.request(
      'POST',
      `/v1/bot-recordings/${second.json.recording.id}/cancel`,
      {},
      as(sessions.admin),
    );
    assert.equal(byAdmin.status, 202, byAdmin.text);

    // A bot's recording whose meeting is private to someone else is not listed for a member either.
    const secret = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'owner’s private call', visibility: 'private' },
      as(sessions.owner),
    );
    assert.equal(secret.status, 201, secret.text);
    const hidden = randomUUID();
    await h.db
      .owner()
      .insertInto('bot_recordings')
      .values({
        id: hidden,
        workspace_id: h.workspaceId,
        meeting_url: 'https://meet.google.com/own-bots-hidden',
        join_at: start,
        ends_at: new Date(start.getTime() + 1_800_000),
        title: 'owner’s private call',
        status: 'complete',
        meeting_id: secret.json.id,
        owner_user_id: sessions.owner.userId,
      })
      .execute();
    const listed = async (s: Session) =>
      (
        (await h.request('GET', '/v1/bot-recordings', undefined, as(s))).json.recordings as { id: string }[]
      ).map((r) => r.id);
    assert.ok(!(await listed(sessions.member)).includes(hidden), 'a member does not see it');
    assert.equal(
      (await h.request('GET', `/v1/bot-recordings/${hidden}`, undefined, as(sessions.member))).status,
      404,
    );
    assert.ok((await listed(sessions.owner)).includes(hidden), 'its meeting’s owner does');
    assert.ok((await listed(sessions.member)).includes(id), 'a member sees a bot with no meeting yet');

    const feed = await h.request(
      'POST',
      '/v1/calendar-feeds',
      { url: 'https://calendar.example.com/own-bots.ics' },
      as(sessions.admin),
    );
    assert.equal(feed.status, 201, feed.text);
    assert.equal(await ownerOf('calendar_feeds', feed.json.id), sessions.admin.userId);
    // The same feed added again by someone else keeps its first subscriber.
    const again = await h.request(
      'POST',
      '/v1/calendar-feeds',
      { url: 'https://calendar.example.com/own-bots.ics' },
      as(sessions.owner),
    );
    assert.equal(again.json.id, feed.json.id);
    assert.equal(await ownerOf('calendar_feeds', feed.json.id), sessions.admin.userId);
    // U4: a batch is its maker's to cancel, or an admin's.
    const batch = await h.request('POST', '/v1/batches', { title: 'member’s uploads' }, as(sessions.member));
    assert.equal(batch.status, 201, batch.text);
    const notYours = await h.request('POST', `/v1/batches/${batch.json.id}/cancel`, {}, as(other));
    assert.equal(notYours.status, 403, notYours.text);
    assert.match(notYours.json.error.message, /only the person who made this batch, or an admin/);
    const yours = await h.request('POST', `/v1/batches/${batch.json.id}/cancel`, {}, as(sessions.member));
    assert.equal(yours.status, 202, yours.text);
    const othersBatch = await h.request('POST', '/v1/batches', { title: 'other’s uploads' }, as(other));
    const adminCancel = await h.request(
      'POST',
      `/v1/batches/${othersBatch.json.id}/cancel`,
      {},
      as(sessions.admin),
    );
    assert.equal(adminCancel.status, 202, adminCancel.text);

    // The second member leaves (the other tests count the members).
    const left = await h.request('DELETE', `/v1/members/${other.userId}`, undefined, as(sessions.owner));
    assert.equal(left.status, 204, left.text);
  });

  void it('U3: a demoted admin loses admin at the next request; a removed member’s sessions and keys stop', async () => {
    const h2 = h;
    const invite = await h2.request('POST', '/v1/invites', { role: 'admin' }, as(sessions.owner));
    const admin = await redeem(h2, invite.json.token, 'admin2@example.com');
    assert.equal((await h2.request('GET', '/v1/operator/overview', undefined, as(admin))).status, 200);
    const key = await h2.request('POST', '/v1/api-keys', { name: 'admin2' }, as(admin));
    assert.equal(key.status, 201);
    assert.equal(key.json.userId, admin.userId);
    const demote = await h2.request(
      'PATCH',
      `/v1/members/${admin.userId}`,
      { role: 'member' },
      as(sessions.owner),
    );
    assert.equal(demote.status, 200, demote.text);
    const after = await h2.request('GET', '/v1/operator/overview', undefined, as(admin));
    assert.equal(after.status, 403);
    const byKey = await h2.request('GET', '/v1/operator/overview', undefined, {
      authorization: `Bearer ${key.json.key}`,
    });
    assert.equal(byKey.status, 403, 'the key acts with its person’s role now');
    // An admin cannot touch an owner; the last owner cannot be demoted.
    const up = await h2.request(
      'PATCH',
      `/v1/members/${sessions.owner.userId}`,
      { role: 'member' },
      as(sessions.admin),
    );
    assert.equal(up.status, 403);
    const last = await h2.request(
      'PATCH',
      `/v1/members/${sessions.owner.userId}`,
      { role: 'admin' },
      as(sessions.owner),
    );
    assert.equal(last.status, 409);
    assert.equal(last.json.error.code, 'member.last_owner');
    const removed = await h2.request('DELETE', `/v1/members/${admin.userId}`, undefined, as(sessions.admin));
    assert.equal(removed.status, 204, removed.text);
    assert.equal((await h2.request('GET', '/v1/meetings', undefined, as(admin))).status, 401);
    assert.equal(
      (await h2.request('GET', '/v1/meetings', undefined, { authorization: `Bearer ${key.json.key}` }))
        .status,
      401,
    );
  });

  void it('U3: sign out, and sign out everywhere', async () => {
    const a = sessionOf(await signIn(h, 'member@example.com'));
    const b = sessionOf(await signIn(h, 'member@example.com'));
    const out = await h.request('POST', '/v1/auth/sign-out', undefined, as(a));
    assert.equal(out.status, 204);
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(a))).status, 401);
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(b))).status, 200);
    const everywhere = await h.request('POST', '/v1/auth/sign-out-everywhere', undefined, as(b));
    assert.equal(everywhere.status, 204);
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(b))).status, 401);
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(sessions.member))).status, 401);
    sessions.member = sessionOf(await signIn(h, 'member@example.com'));
  });

  void it('U3: a session idle too long, or past its absolute expiry, is signed out', async () => {
    const s = sessionOf(await signIn(h, 'owner@example.com'));
    await h.app.database.db
      .updateTable('sessions')
      .set({ last_seen_at: new Date(Date.now() - h.app.config.sessions.idleMs - 1000) })
      .where('user_id', '=', s.userId)
      .where('revoked_at', 'is', null)
      .execute();
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(s))).status, 401);
    const t = sessionOf(await signIn(h, 'owner@example.com'));
    await h.app.database.db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('user_id', '=', t.userId)
      .where('revoked_at', 'is', null)
      .execute();
    assert.equal((await h.request('GET', '/v1/meetings', undefined, as(t))).status, 401);
    sessions.owner = sessionOf(await signIn(h, 'owner@example.com'));
  });

  void it('U6: a key has scopes within its maker’s, and expires no later than the key that made it', async () => {
    const soon = new Date(Date.now() + 3_600_000).toISOString();
    const parent = await h.request('POST', '/v1/api-keys', {
      name: 'parent',
      expiresAt: soon,
      scopes: ['read', 'keys'],
    });
    assert.equal(parent.status, 201, parent.text);
    const auth = { authorization: `Bearer ${parent.json.key}` };
    assert.equal((await h.request('GET', '/v1/meetings', undefined, auth)).status, 200);
    const write = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'x' }, auth);
    assert.equal(write.status, 403);
    assert.match(write.json.error.message, /lacks the write scope/);
    const later = await h.request('POST', '/v1/api-keys', { expiresAt: '2030-01-01T00:00:00Z' }, auth);
    assert.equal(later.status, 400);
    assert.equal(later.json.error.code, 'api_key.expires_at');
    const wider = await h.request('POST', '/v1/api-keys', { scopes: ['write'] }, auth);
    assert.equal(wider.json.error.code, 'api_key.scopes');
    const child = await h.request('POST', '/v1/api-keys', {}, auth);
    assert.equal(child.status, 201);
    assert.equal(child.json.expiresAt, parent.json.expiresAt, 'no expiry asked: the parent’s');
    assert.deepEqual(child.json.scopes, ['read', 'keys']);
    // Pure: every pair of scopes is bounded the same way.
    for (const s of SCOPES)
      assert.equal(decide({ role: 'owner', scopes: [s] }, 'meetings.read').allowed, s === 'read');
  });

  void it('U1: a member lists only their own keys; an admin lists all', async () => {
    const mine = await h.request('POST', '/v1/api-keys', { name: 'members-own' }, as(sessions.member));
    assert.equal(mine.status, 201);
    const memberList = await h.request('GET', '/v1/api-keys', undefined, as(sessions.member));
    const memberKeys = memberList.json.apiKeys as Array<{ userId: string | null }>;
    assert.ok(memberKeys.length > 0);
    assert.deepEqual(
      memberKeys.map((k) => k.userId),
      memberKeys.map(() => sessions.member.userId),
    );
    const adminList = await h.request('GET', '/v1/api-keys', undefined, as(sessions.admin));
    const adminKeys = adminList.json.apiKeys as Array<{ userId: string | null }>;
    assert.ok(
      adminKeys.some((k) => k.userId === null),
      'service keys too',
    );
    const members = await h.request('GET', '/v1/members', undefined, as(sessions.viewer));
    const roles = (members.json.members as Array<{ role: string }>).map((m) => m.role);
    assert.deepEqual(roles.sort(), ['admin', 'member', 'owner', 'viewer']);
  });

  void it('U2: a setup or invite link works once; used or unknown it is 404 and tells nothing of an email; it never changes a member’s role', async () => {
    const link = await createSetupLink(h.app.people, h.workspaceId);
    await redeem(h, link.token, 'second-owner@example.com');
    const again = await h.api.inject({
      method: 'POST',
      url: '/v1/auth/links/redeem',
      payload: { token: link.token, email: 'third@example.com', password: PASSWORD },
    });
    assert.equal(again.statusCode, 404);
    assert.equal(again.json().error.code, 'link.not_found');
    const short = await h.api.inject({
      method: 'POST',
      url: '/v1/auth/links/redeem',
      payload: { token: link.token, email: 'third@example.com', password: 'short' },
    });
    assert.equal(short.statusCode, 400);
    assert.equal(short.json().error.code, 'user.password');
    // A made-up token says nothing about an email, whatever the password.
    for (const password of [PASSWORD, 'not the password at all']) {
      const guess = await h.api.inject({
        method: 'POST',
        url: '/v1/auth/links/redeem',
        payload: { token: 'vbl_made-up', email: 'owner@example.com', password },
      });
      assert.equal(guess.statusCode, 404);
    }
    // A link never changes the role of someone already a member (an owner is not demoted by it).
    const invite = await h.request('POST', '/v1/invites', { role: 'viewer' }, as(sessions.owner));
    const again2 = await h.api.inject({
      method: 'POST',
      url: '/v1/auth/links/redeem',
      payload: { token: invite.json.token, email: 'owner@example.com', password: PASSWORD },
    });
    assert.equal(again2.statusCode, 409);
    assert.equal(again2.json().error.code, 'member.exists');
  });

  void it('U4: a member’s private meeting is invisible to another member through every route and to a statement run as the app’s role; its owner and admins see it; shared, the named member sees it', async () => {
    const sup = supervise(h, {});
    try {
      const created = await h.request(
        'POST',
        '/v1/meetings',
        { source: 'upload', title: 'private budget', visibility: 'private' },
        as(sessions.member),
      );
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json.visibility, 'private');
      assert.equal(created.json.ownerUserId, sessions.member.userId);
      const id = created.json.id as string;
      const put = await h.request('PUT', `/v1/meetings/${id}/recording`, speechWav(SPEECH), {
        ...as(sessions.member),
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 202, put.text);
      await waitForMeeting(h, id);
      await waitFor(
        'the meeting to be indexed',
        async () =>
          (await h.app.database.db
            .selectFrom('search_index_state')
            .select('meeting_id')
            .where('meeting_id', '=', id)
            .executeTakeFirst()) ?? null,
      );
      const reads = [
        `/v1/meetings/${id}`,
        `/v1/meetings/${id}/transcript`,
        `/v1/meetings/${id}/transcript?format=vtt`,
        `/v1/meetings/${id}/transcript?format=docx`,
        `/v1/meetings/${id}/speakers`,
        `/v1/meetings/${id}/access`,
      ];
      const sees = async (who: Session) => {
        const list = await h.request('GET', '/v1/meetings', undefined, as(who));
        const listed = (list.json.meetings as Array<{ id: string }>).some((m) => m.id === id);
        const statuses = [];
        for (const url of reads) statuses.push((await h.request('GET', url, undefined, as(who))).status);
        const found = await h.request('GET', '/v1/search?q=budget', undefined, as(who));
        const searched = (found.json.results as Array<{ meeting: { id: string } }>).some(
          (r) => r.meeting.id === id,
        );
        const asked = await h.request('POST', '/v1/ask', { question: 'who will send the report?' }, as(who));
        const cited = JSON.stringify(asked.json).includes(id);
        // A stream of a meeting one may read never ends; only a refused one is asked for.
        const stream = listed
          ? 200
          : (await h.api.inject({ method: 'GET', url: `/v1/meetings/${id}/events`, headers: as(who) }))
              .statusCode;
        return { listed, statuses, searched, cited, stream };
      };
      const hidden = {
        listed: false,
        statuses: reads.map(() => 404),
        searched: false,
        cited: false,
        stream: 404,
      };
      assert.deepEqual(await sees(sessions.viewer), hidden, 'a viewer');
      const other = await h.request('POST', '/v1/invites', { role: 'member' }, as(sessions.owner));
      const otherMember = await redeem(h, other.json.token, 'other-member@example.com');
      assert.deepEqual(await sees(otherMember), hidden, 'another member');
      for (const who of [sessions.member, sessions.admin]) {
        const seen = await sees(who);
        assert.equal(seen.listed, true);
        assert.deepEqual(
          seen.statuses,
          reads.map(() => 200),
        );
        assert.equal(seen.searched, true);
        assert.equal(seen.cited, true, 'ask answers from it');
      }
      // Another member may not change it, even knowing its id; its owner may share it.
      const del = await h.request('DELETE', `/v1/meetings/${id}`, undefined, as(otherMember));
      assert.equal(del.status, 404, 'what cannot be read cannot be changed');
      const share = await h.request(
        'PUT',
        `/v1/meetings/${id}/access`,
        { visibility: 'shared', sharedWith: [otherMember.userId] },
        as(sessions.member),
      );
      assert.equal(share.status, 200, share.text);
      assert.deepEqual(share.json.sharedWith, [otherMember.userId]);
      assert.equal((await h.request('GET', `/v1/meetings/${id}`, undefined, as(otherMember))).status, 200);
      assert.equal(
        (await h.request('GET', `/v1/meetings/${id}`, undefined, as(sessions.viewer))).status,
        404,
      );
      const notOwner = await h.request('DELETE', `/v1/meetings/${id}`, undefined, as(otherMember));
      assert.equal(notOwner.status, 403, 'shown to them, still not theirs to delete');
      // The second wall: a statement as the app's tenant role with the viewer's settings.
      const visibleAs = async (userId: string, seeAll: 'on' | 'off') =>
        h.app.database.db.transaction().execute(async (trx) => {
          await sql`select set_config('role', 'verbatim_tenant', true),
                           set_config('verbatim.workspace_id', ${h.workspaceId}, true),
                           set_config('verbatim.user_id', ${userId}, true),
                           set_config('verbatim.see_all', ${seeAll}, true)`.execute(trx);
          const rows = await sql<{ id: string }>`select id from meetings where id = ${id}`.execute(trx);
          return rows.rows.length;
        });
      assert.equal(await visibleAs(sessions.viewer.userId, 'off'), 0);
      assert.equal(await visibleAs(otherMember.userId, 'off'), 1, 'shared with them');
      assert.equal(await visibleAs(sessions.member.userId, 'off'), 1, 'their own');
      // The older search functions a statement may still name read through the same policy.
      const foundAs = async (userId: string) =>
        h.app.database.db.transaction().execute(async (trx) => {
          await sql`select set_config('role', 'verbatim_tenant', true),
                           set_config('verbatim.workspace_id', ${h.workspaceId}, true),
                           set_config('verbatim.user_id', ${userId}, true),
                           set_config('verbatim.see_all', 'off', true)`.execute(trx);
          const nine = await sql<{ meeting_id: string }>`select meeting_id
            from verbatim_search('budget', null, null, null, null, 0, 100, 1000, 1)`.execute(trx);
          const meetings = await sql<{ meeting_id: string }>`select meeting_id
            from verbatim_search_meetings('budget', null, null, null, null, 0, 100, 1000)`.execute(trx);
          return [...nine.rows, ...meetings.rows].filter((r) => r.meeting_id === id).length;
        });
      assert.equal(await foundAs(sessions.viewer.userId), 0, 'not through the nine-argument search either');
      assert.equal(await foundAs(sessions.member.userId), 2, 'its owner finds it through both');
    } finally {
      await sup.stop();
    }
  });

  void it('U5: a share link opens its meeting read-only and nothing else; revoked or expired it gets 404; only the owner or an admin makes one', async () => {
    const sup = supervise(h, {});
    try {
      const made = async (title: string) => {
        const created = await h.request(
          'POST',
          '/v1/meetings',
          { source: 'upload', title, visibility: 'private' },
          as(sessions.member),
        );
        assert.equal(created.status, 201, created.text);
        const put = await h.request('PUT', `/v1/meetings/${created.json.id}/recording`, speechWav(SPEECH), {
          ...as(sessions.member),
          'content-type': 'audio/wav',
        });
        assert.equal(put.status, 202, put.text);
        return created.json.id as string;
      };
      const id = await made('client review');
      const other = await made('internal only');
      await waitForMeeting(h, id);
      // Its words said by a known speaker (a channel's, as a stereo upload gives them).
      await sql`insert into speakers (workspace_id, meeting_id, key, source, label)
                select workspace_id, id, 'channel-1', 'channel', 'Channel 1' from meetings where id = ${id}::uuid`.execute(
        h.db.owner(),
      );
      await sql`update segments set speaker_key = 'channel-1' where meeting_id = ${id}::uuid`.execute(
        h.db.owner(),
      );

      // Who may make one: its owner and an admin; not a viewer, nor a member who does not own it.
      assert.equal(
        (await h.request('POST', `/v1/meetings/${id}/share-links`, {}, as(sessions.viewer))).status,
        403,
      );
      const invite = await h.request('POST', '/v1/invites', { role: 'member' }, as(sessions.owner));
      const stranger = await redeem(h, invite.json.token, 'stranger@example.com');
      await h.request(
        'PUT',
        `/v1/meetings/${id}/access`,
        { visibility: 'shared', sharedWith: [stranger.userId] },
        as(sessions.member),
      );
      const notOwner = await h.request('POST', `/v1/meetings/${id}/share-links`, {}, as(stranger));
      assert.equal(notOwner.status, 403, notOwner.text);
      await h.request('PUT', `/v1/meetings/${id}/access`, { visibility: 'private' }, as(sessions.member));
      const bad = await h.request(
        'POST',
        `/v1/meetings/${id}/share-links`,
        { expiresInDays: 0 },
        as(sessions.member),
      );
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.code, 'share.expires_in_days');

      const link = await h.request(
        'POST',
        `/v1/meetings/${id}/share-links`,
        { expiresInDays: 2 },
        as(sessions.member),
      );
      assert.equal(link.status, 201, link.text);
      const token = link.json.token as string;
      assert.equal(
        link.json.path,
        `/#/s/${token}`,
        'the web app’s page; the token after # never reaches a server log',
      );
      const byAdmin = await h.request('POST', `/v1/meetings/${id}/share-links`, {}, as(sessions.admin));
      assert.equal(byAdmin.status, 201, 'an admin may');

      // Opened with no key and no session: the meeting, read-only.
      const open = await h.api.inject({ method: 'GET', url: `/v1/shared/${token}` });
      assert.equal(open.statusCode, 200, open.body);
      const shown = open.json();
      assert.equal(shown.meeting.title, 'client review');
      assert.equal(shown.meeting.status, 'complete');
      assert.ok(shown.transcript.segments.length > 0, 'its transcript');
      assert.deepEqual(
        [...new Set((shown.transcript.segments as Array<{ speaker: unknown }>).map((s) => s.speaker))],
        ['Channel 1'],
        'who said it, by name',
      );
      assert.equal(
        JSON.stringify(shown).includes(id),
        false,
        'not even its id: nothing to reach further with',
      );

      // Nothing else: the token is no key or session anywhere; writes have no shared route at all.
      for (const url of [
        '/v1/meetings',
        `/v1/meetings/${id}`,
        `/v1/meetings/${other}`,
        `/v1/meetings/${id}/transcript`,
      ]) {
        const res = await h.api.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
        assert.equal(res.statusCode, 401, `${url} with the link's token`);
      }
      const write = await h.api.inject({ method: 'DELETE', url: `/v1/shared/${token}` });
      assert.equal(write.statusCode, 404);
      // The second wall: the share link's reader, as the app's role, sees this one meeting only.
      const visible = await h.app.database.db.transaction().execute(async (trx) => {
        await sql`select set_config('role', 'verbatim_tenant', true),
                         set_config('verbatim.workspace_id', ${h.workspaceId}, true),
                         set_config('verbatim.user_id', '', true),
                         set_config('verbatim.see_all', ${`meeting:${id}`}, true)`.execute(trx);
        return (await sql<{ id: string }>`select id from meetings`.execute(trx)).rows.map((r) => r.id);
      });
      assert.deepEqual(visible, [id]);

      // Its owner lists it (opened once), then revokes it: 404, as for an unknown token.
      const listed = await h.request('GET', `/v1/meetings/${id}/share-links`, undefined, as(sessions.member));
      assert.equal(listed.status, 200);
      const mine = (listed.json.links as Array<{ id: string; opens: number }>).find(
        (l) => l.id === link.json.link.id,
      )!;
      assert.equal(mine.opens, 1);
      assert.equal(JSON.stringify(listed.json).includes(token), false, 'tokens are shown once');
      const revoke = await h.request(
        'DELETE',
        `/v1/meetings/${id}/share-links/${link.json.link.id}`,
        undefined,
        as(sessions.member),
      );
      assert.equal(revoke.status, 204);
      const revoked = await h.api.inject({ method: 'GET', url: `/v1/shared/${token}` });
      assert.equal(revoked.statusCode, 404);
      assert.equal(revoked.json().error.code, 'share.not_found');
      const unknown = await h.api.inject({ method: 'GET', url: `/v1/shared/vsh_${'a'.repeat(43)}` });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().error.code, 'share.not_found');

      // Expired (its time moved past, as days passing would): 404.
      const adminsToken = byAdmin.json.token as string;
      assert.equal((await h.api.inject({ method: 'GET', url: `/v1/shared/${adminsToken}` })).statusCode, 200);
      await sql`update share_links set expires_at = now() - interval '1 second' where id = ${byAdmin.json.link.id}`.execute(
        h.app.database.db,
      );
      assert.equal((await h.api.inject({ method: 'GET', url: `/v1/shared/${adminsToken}` })).statusCode, 404);
      assert.ok(!h.logs().includes(token) && !h.logs().includes(adminsToken), 'tokens never reach the logs');

      // A link does not outlive its maker's place: made by an admin who is then made a viewer, or
      // removed, it answers 404 (found in review).
      const invite2 = await h.request('POST', '/v1/invites', { role: 'admin' }, as(sessions.owner));
      const leaving = await redeem(h, invite2.json.token, 'leaving-admin@example.com');
      const theirs = await h.request('POST', `/v1/meetings/${id}/share-links`, {}, as(leaving));
      assert.equal(theirs.status, 201, theirs.text);
      const open2 = () => h.api.inject({ method: 'GET', url: `/v1/shared/${theirs.json.token}` });
      assert.equal((await open2()).statusCode, 200);
      assert.equal(
        (await h.request('PATCH', `/v1/members/${leaving.userId}`, { role: 'viewer' }, as(sessions.owner)))
          .status,
        200,
      );
      assert.equal((await open2()).statusCode, 404, 'its maker is a viewer now');
      assert.equal(
        (await h.request('DELETE', `/v1/members/${leaving.userId}`, undefined, as(sessions.owner))).status,
        204,
      );
      assert.equal((await open2()).statusCode, 404, 'its maker is gone');
    } finally {
      await sup.stop();
    }
  });

  void it('U8: the audit trail records sign-ins and failures, role changes, shares and link opens, exports, deletions and key changes (who, what, from where); admins read it, others may not; `verbatim audit` prints it', async () => {
    const since = await h.app.database.db
      .selectFrom('audit_trail')
      .select((eb) => eb.fn.max('id').as('max'))
      .executeTakeFirst();
    const after = String(since?.max ?? '0');

    const invite = await h.request('POST', '/v1/invites', { role: 'member' }, as(sessions.owner));
    await redeem(h, invite.json.token, 'audited@example.com');
    // Sign-ins: a wrong password for a member, an email nobody has, then the right password.
    const wrong = await signIn(h, 'audited@example.com', 'not the password at all');
    assert.equal(wrong.statusCode, 401, wrong.body);
    assert.equal((await signIn(h, 'no-account@example.com', 'not the password at all')).statusCode, 401);
    const signedIn = await signIn(h, 'audited@example.com');
    assert.equal(signedIn.statusCode, 200, signedIn.body);
    const member = sessionOf(signedIn);
    // A role change, there and back.
    for (const role of ['member', 'viewer'])
      assert.equal(
        (await h.request('PATCH', `/v1/members/${sessions.viewer.userId}`, { role }, as(sessions.owner)))
          .status,
        200,
      );
    // A meeting: made private, shared by link (opened, revoked), exported, deleted.
    const made = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'audited' }, as(member));
    const id = made.json.id as string;
    assert.equal(
      (await h.request('PUT', `/v1/meetings/${id}/access`, { visibility: 'private' }, as(member))).status,
      200,
    );
    const link = await h.request('POST', `/v1/meetings/${id}/share-links`, {}, as(member));
    assert.equal(
      (await h.api.inject({ method: 'GET', url: `/v1/shared/${link.json.token}` })).statusCode,
      200,
    );
    assert.equal(
      (
        await h.request(
          'DELETE',
          `/v1/meetings/${id}/share-links/${link.json.link.id}`,
          undefined,
          as(member),
        )
      ).status,
      204,
    );
    const exported = await h.request(
      'GET',
      `/v1/meetings/${id}/transcript?format=txt`,
      undefined,
      as(member),
    );
    assert.equal(exported.status, 200, exported.text);
    assert.equal(
      (await h.request('GET', `/v1/meetings/${id}/transcript`, undefined, as(member))).status,
      200,
    );
    // A key made and revoked.
    const key = await h.request('POST', '/v1/api-keys', { name: 'laptop' }, as(member));
    assert.equal(key.status, 201, key.text);
    assert.equal(
      (await h.request('DELETE', `/v1/api-keys/${key.json.id}`, undefined, as(member))).status,
      204,
    );
    assert.equal((await h.request('DELETE', `/v1/meetings/${id}`, undefined, as(member))).status, 204);

    // Read by an admin: newest first, each with its actor, subject and address.
    assert.equal((await h.request('GET', '/v1/audit', undefined, as(member))).status, 403);
    const res = await h.request('GET', '/v1/audit?limit=500', undefined, as(sessions.admin));
    assert.equal(res.status, 200, res.text);
    type Event = {
      id: string;
      action: string;
      actor: { kind: string; userId: string | null; label: string | null };
      subject: { type: string; id: string } | null;
      address: string | null;
      detail: Record<string, unknown>;
    };
    const events = (res.json.events as Event[]).filter((e) => BigInt(e.id) > BigInt(after)).reverse();
    const find = (action: string, pred: (e: Event) => boolean = () => true) => {
      const found = events.find((e) => e.action === action && pred(e));
      assert.ok(found, `${action} in ${events.map((e) => e.action).join(', ')}`);
      return found;
    };
    const failed = find('auth.sign_in_failed');
    assert.equal(failed.actor.label, 'audited@example.com');
    assert.equal(failed.detail.reason, 'wrong password');
    assert.ok(
      !events.some((e) => e.actor.label === 'no-account@example.com'),
      'an unknown email is in no workspace’s trail',
    );
    assert.deepEqual(
      events
        .filter((e) => e.action === 'auth.signed_in' && e.actor.userId === member.userId)
        .map((e) => e.detail.method),
      ['link', 'password'],
      'joined by link, then signed in with the password',
    );
    const roleChange = find('member.role_changed');
    assert.deepEqual(roleChange.subject, { type: 'user', id: sessions.viewer.userId });
    assert.equal(roleChange.actor.userId, sessions.owner.userId);
    assert.equal(roleChange.detail.role, 'member');
    assert.equal(find('meeting.access_changed').detail.visibility, 'private');
    find('share.link_made', (e) => e.subject?.id === id && e.actor.userId === member.userId);
    assert.equal(find('share.link_opened').actor.kind, 'share_link');
    find('share.link_revoked', (e) => e.subject?.id === link.json.link.id);
    assert.equal(find('meeting.exported').detail.format, 'txt');
    assert.equal(events.filter((e) => e.action === 'meeting.exported').length, 1, 'a JSON read is no export');
    find('key.created', (e) => e.actor.userId === member.userId);
    find('key.revoked', (e) => e.subject?.id === key.json.id);
    find('meeting.deleted', (e) => e.subject?.id === id);
    assert.ok(
      events.every((e) => e.address === '127.0.0.1'),
      'from where',
    );
    assert.ok(!JSON.stringify(res.json).includes(link.json.token), 'no token in the trail');
    // Pages: `next` goes on where the last page stopped.
    const page = await h.request('GET', '/v1/audit?limit=2&action=share.', undefined, as(sessions.admin));
    assert.equal(page.json.events.length, 2);
    assert.ok((page.json.events as Event[]).every((e) => e.action.startsWith('share.')));
    const next = await h.request(
      'GET',
      `/v1/audit?limit=2&action=share.&before=${page.json.next}`,
      undefined,
      as(sessions.admin),
    );
    assert.ok(BigInt(next.json.events[0].id) < BigInt(page.json.events[1].id));
    assert.equal((await h.request('GET', '/v1/audit?limit=0', undefined, as(sessions.admin))).status, 400);

    // The operator's command: a workspace's trail, and what belongs to none.
    const name = (
      await h.app.database.db
        .selectFrom('workspaces')
        .select('name')
        .where('id', '=', h.workspaceId)
        .executeTakeFirstOrThrow()
    ).name;
    const run = spawnVerbatim(['audit', '--workspace', name, '--action', 'member.'], h.env());
    assert.equal(await run.exited, 0, run.output());
    assert.match(run.output(), /member\.role_changed/);
    assert.doesNotMatch(run.output(), /share\.link_made/);
    const none = spawnVerbatim(['audit', '--action', 'auth.'], h.env());
    assert.equal(await none.exited, 0, none.output());
    assert.match(none.output(), /auth\.sign_in_failed\s+anonymous no-account@example\.com/);
  });

  void it('U6: a workspace holds at most VERBATIM_MAX_API_KEYS active keys, parallel requests included; a revoked one frees its place', async () => {
    const capped = await startHarness({ env: { VERBATIM_MAX_API_KEYS: '4' } });
    try {
      // The harness's own key is one of the four.
      const made = await Promise.all(
        Array.from({ length: 6 }, (_, i) => capped.request('POST', '/v1/api-keys', { name: `k${i}` })),
      );
      const ok = made.filter((r) => r.status === 201);
      const refused = made.filter((r) => r.status === 409);
      assert.equal(ok.length, 3, made.map((r) => r.status).join(' '));
      assert.equal(refused.length, 3);
      assert.ok(refused.every((r) => r.json.error.code === 'api_key.limit'));
      assert.match(refused[0]!.json.error.message, /VERBATIM_MAX_API_KEYS/);
      assert.equal((await capped.request('DELETE', `/v1/api-keys/${ok[0]!.json.id}`)).status, 204);
      assert.equal((await capped.request('POST', '/v1/api-keys', { name: 'again' })).status, 201);
      assert.equal((await capped.request('POST', '/v1/api-keys', { name: 'one more' })).status, 409);
    } finally {
      await capped.close();
    }
  });

  void it('U2: parallel guesses cannot pass the lockout together: of twenty wrong passwords sent at once, only the allowed number are checked', async () => {
    const invite = await h.request('POST', '/v1/invites', { role: 'viewer' }, as(sessions.owner));
    await redeem(h, invite.json.token, 'guessed@example.com');
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => signIn(h, 'guessed@example.com', `wrong guess number ${i}`)),
    );
    const checked = answers.filter((r) => r.statusCode === 401).length;
    const refused = answers.filter((r) => r.statusCode === 429).length;
    assert.equal(checked + refused, 20, answers.map((r) => r.statusCode).join(' '));
    // VERBATIM_SIGN_IN_MAX_FAILURES (5): the fifth failure already answers 429, so at most four 401s.
    assert.ok(checked <= 4, `${checked} guesses were checked`);
    assert.ok(answers.filter((r) => r.statusCode === 429).every((r) => Number(r.headers['retry-after']) > 0));
    // Locked now, the right password waits too.
    assert.equal((await signIn(h, 'guessed@example.com')).statusCode, 429);
    // When the lock runs out (its time moved past, as waiting would), the right password works:
    // the first attempt after a lock is checked, whatever the count says (found in review).
    const lapse = () =>
      sql`update sign_in_throttle set locked_until = now() - interval '1 second'
           where locked_until is not null`.execute(h.app.database.db);
    await lapse();
    assert.equal(
      (await signIn(h, 'guessed@example.com', 'still a wrong guess')).statusCode,
      429,
      'a wrong one locks again',
    );
    await lapse();
    const right = await signIn(h, 'guessed@example.com');
    assert.equal(right.statusCode, 200, `the right one gets in: ${right.body}`);
  });
});
