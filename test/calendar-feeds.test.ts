import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { addCalendarFeed, pollFeed } from '../src/bots/calendar-feeds.ts';
import { meetingUrlOf, parseIcs } from '../src/domain/ics.ts';
import { canonicalMeetingUrl } from '../src/domain/meeting-url.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { stamp, vevent } from './support/ics.ts';

const HOUR = 3_600_000;

const calendar = (events: string[]) =>
  ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//verbatim-test//EN', ...events, 'END:VCALENDAR'].join('\r\n');

void describe('calendar feeds', () => {
  let h: Harness;
  let server: http.Server;
  let body = '';
  /** Other attendees' feeds, by path. */
  const bodies = new Map<string, string>();
  let status = 200;
  let url = '';

  before(async () => {
    // The test's calendar server speaks plain http on loopback, which an operator may allow by host.
    h = await startHarness({ env: { VERBATIM_FEED_PLAIN_HTTP_HOSTS: '127.0.0.1' } });
    server = http.createServer((req, res) => {
      res.writeHead(status, { 'content-type': 'text/calendar' }).end(bodies.get(req.url ?? '') ?? body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/team.ics`;
  });
  after(async () => {
    await h?.close();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const recordings = () =>
    h.app.database.db
      .selectFrom('bot_recordings')
      .select(['id', 'meeting_url', 'join_at', 'status', 'title'])
      .where('workspace_id', '=', h.workspaceId)
      .orderBy('join_at')
      .execute();

  void it('R1: meeting links are found in the URL, location or description', () => {
    assert.equal(
      meetingUrlOf(null, 'Room 4 / https://acme.zoom.us/j/123?pwd=x.'),
      'https://acme.zoom.us/j/123?pwd=x',
    );
    assert.equal(
      meetingUrlOf('Join: https://meet.google.com/abc-defg-hij'),
      'https://meet.google.com/abc-defg-hij',
    );
    assert.equal(meetingUrlOf('https://example.com/agenda'), null, 'not a video call');
  });

  void it('R1: one meeting however its link is written: host case, trailing slash, fragment, authuser and tracking parameters do not make a second recording', () => {
    const canon = (u: string) => canonicalMeetingUrl(new URL(u));
    assert.equal(
      canon('https://MEET.google.com/ABC-defg-hij/?authuser=1#x'),
      'https://meet.google.com/abc-defg-hij',
    );
    assert.equal(
      canon('https://Acme.Zoom.us/j/123/?utm_source=cal&pwd=s3cr3t&from=addon'),
      'https://acme.zoom.us/j/123?pwd=s3cr3t',
      'zoom keeps its passcode only',
    );
    assert.equal(
      canon(
        'https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0?utm_medium=x&context=%7b%7d',
      ),
      'https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0?context=%7B%7D',
      'other links keep what selects the call',
    );
    const teams =
      'https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0?context=%7b%22Tid%22%3a%22t%22%7d';
    assert.equal(canon(teams), teams, 'a link with nothing to drop is kept byte for byte');
    assert.equal(
      meetingUrlOf('Join https://meet.google.com/abc-defg-hij?authuser=0'),
      canon('https://meet.google.com/ABC-DEFG-HIJ'),
    );
  });

  void it('R1: RECURRENCE-ID exceptions replace their occurrence: a moved one keeps its identity at its new time, a canceled one is dropped, a relinked one has its new link', () => {
    const base = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 3 * HOUR);
    const day = 24 * HOUR;
    const series = vevent('daily', base, ['RRULE:FREQ=DAILY;COUNT=4', 'LOCATION:https://acme.zoom.us/j/500']);
    const slot = (i: number) => new Date(base.getTime() + i * day);
    const text = calendar([
      series,
      vevent('daily', new Date(slot(1).getTime() + 2 * HOUR), [
        `RECURRENCE-ID:${stamp(slot(1))}`,
        'LOCATION:https://acme.zoom.us/j/500',
      ]),
      vevent('daily', slot(2), [`RECURRENCE-ID:${stamp(slot(2))}`, 'STATUS:CANCELLED']),
      vevent('daily', slot(3), [`RECURRENCE-ID:${stamp(slot(3))}`, 'LOCATION:https://acme.zoom.us/j/777']),
    ]);
    const got = parseIcs(text, new Date(), new Date(base.getTime() + 10 * day));
    assert.deepEqual(
      got.map((o) => [o.uid, o.start.getTime() - base.getTime(), o.canceled, o.meetingUrl]),
      [
        [`daily#${slot(0).toISOString()}`, 0, false, 'https://acme.zoom.us/j/500'],
        [`daily#${slot(1).toISOString()}`, day + 2 * HOUR, false, 'https://acme.zoom.us/j/500'],
        [`daily#${slot(2).toISOString()}`, 2 * day, true, null],
        [`daily#${slot(3).toISOString()}`, 3 * day, false, 'https://acme.zoom.us/j/777'],
      ],
    );
  });

  void it('R1: a polled ICS feed gives each eligible meeting one recording; moved, canceled and deleted events are reconciled', async () => {
    const base = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 2 * HOUR);
    const zoom = 'https://acme.zoom.us/j/111';
    const meet = 'https://meet.google.com/aaa-bbbb-ccc';
    body = calendar([
      vevent('standup', base, [`LOCATION:${zoom}`]),
      // The same meeting on two attendees' calendars: one recording.
      vevent('review-alice', new Date(base.getTime() + HOUR), [`DESCRIPTION:Join ${meet}`]),
      vevent('review-bob', new Date(base.getTime() + HOUR), [`URL:${meet}`]),
      vevent('lunch', new Date(base.getTime() + 2 * HOUR), ['LOCATION:Cafeteria']),
      vevent('dropped', new Date(base.getTime() + 3 * HOUR), [
        'STATUS:CANCELLED',
        'LOCATION:https://acme.zoom.us/j/999',
      ]),
      vevent('weekly', new Date(base.getTime() + 4 * HOUR), [
        'RRULE:FREQ=WEEKLY;COUNT=3',
        'LOCATION:https://acme.zoom.us/j/222',
      ]),
    ]);
    const feed = await addCalendarFeed(h.app.deps, h.workspaceId, { url });
    const first = await pollFeed(h.app.deps, feed.id);
    assert.equal(first.created, 4, 'standup, the review once, and the weekly meeting twice within two weeks');
    let rows = await recordings();
    assert.equal(rows.length, 4);
    assert.equal(rows.filter((r) => r.meeting_url === meet).length, 1, 'two copies, one recording');
    assert.equal(
      rows.filter((r) => r.meeting_url.includes('/j/999')).length,
      0,
      'a canceled event gets none',
    );

    // Unchanged: nothing happens. Then standup moves and the review disappears.
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 0, canceled: 0 });
    const moved = new Date(base.getTime() + 30 * 60_000);
    body = calendar([
      vevent('standup', moved, [`LOCATION:${zoom}`]),
      vevent('weekly', new Date(base.getTime() + 4 * HOUR), [
        'RRULE:FREQ=WEEKLY;COUNT=3',
        'LOCATION:https://acme.zoom.us/j/222',
      ]),
    ]);
    const second = await pollFeed(h.app.deps, feed.id);
    assert.deepEqual(second, { created: 1, canceled: 2 });
    rows = await recordings();
    const standups = rows.filter((r) => r.meeting_url === zoom);
    assert.deepEqual(
      standups.map((r) => [r.join_at.getTime(), r.status]),
      [
        [base.getTime(), 'canceled'],
        [moved.getTime(), 'pending'],
      ],
    );
    assert.equal(rows.find((r) => r.meeting_url === meet)!.status, 'canceled', 'deleted from the feed');

    // Only the end changes: the same recording, with its new end (no cancel, no second bot).
    body = calendar([
      vevent('standup', moved, [`LOCATION:${zoom}`], 60),
      vevent('weekly', new Date(base.getTime() + 4 * HOUR), [
        'RRULE:FREQ=WEEKLY;COUNT=3',
        'LOCATION:https://acme.zoom.us/j/222',
      ]),
    ]);
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 0, canceled: 0 });
    const longer = (await recordings()).find((r) => r.meeting_url === zoom && r.status === 'pending')!;
    const ends = await h.app.database.db
      .selectFrom('bot_recordings')
      .select('ends_at')
      .where('id', '=', longer.id)
      .executeTakeFirstOrThrow();
    assert.equal(ends.ends_at.getTime(), moved.getTime() + 60 * 60_000);
    rows = await recordings();

    // A feed that cannot be read is not taken as "every event deleted".
    status = 500;
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 0, canceled: 0 });
    const after = await recordings();
    assert.deepEqual(
      after.map((r) => r.status),
      rows.map((r) => r.status),
    );
    const stored = await h.app.database.db
      .selectFrom('calendar_feeds')
      .select('last_error')
      .where('id', '=', feed.id)
      .executeTakeFirstOrThrow();
    assert.match(stored.last_error ?? '', /HTTP 500/);
  });

  void it("R1: two attendees' feeds share one recording: one copy removed keeps it, both removed cancel it; an event moved away and back gets a new recording", async () => {
    status = 200;
    const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 30 * HOUR);
    const shared = 'https://meet.google.com/sha-redx-abc';
    bodies.set('/alice.ics', calendar([vevent('planning-a', start, [`LOCATION:${shared}`])]));
    // Bob's copy writes the link differently: the same meeting.
    bodies.set(
      '/bob.ics',
      calendar([vevent('planning-b', start, [`URL:https://MEET.google.com/SHA-REDX-ABC/?authuser=2`])]),
    );
    const base = url.replace('/team.ics', '');
    const alice = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/alice.ics` });
    const bob = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/bob.ics` });
    assert.equal((await pollFeed(h.app.deps, alice.id)).created, 1);
    assert.equal((await pollFeed(h.app.deps, bob.id)).created, 0, 'the same meeting');
    const ofShared = async () => (await recordings()).filter((r) => r.meeting_url === shared);
    assert.equal((await ofShared()).length, 1);

    bodies.set('/alice.ics', calendar([]));
    assert.deepEqual(await pollFeed(h.app.deps, alice.id), { created: 0, canceled: 0 }, 'Bob still has it');
    assert.deepEqual(
      (await ofShared()).map((r) => r.status),
      ['pending'],
    );
    bodies.set('/bob.ics', calendar([]));
    assert.deepEqual(await pollFeed(h.app.deps, bob.id), { created: 0, canceled: 1 }, 'nobody has it');
    assert.deepEqual(
      (await ofShared()).map((r) => r.status),
      ['canceled'],
    );

    // Moved away and back: the slot's canceled recording does not come back; a new one is made.
    const later = new Date(start.getTime() + 2 * HOUR);
    bodies.set('/bob.ics', calendar([vevent('planning-b', later, [`URL:${shared}`])]));
    assert.deepEqual(await pollFeed(h.app.deps, bob.id), { created: 1, canceled: 0 });
    bodies.set('/bob.ics', calendar([vevent('planning-b', start, [`URL:${shared}`])]));
    assert.deepEqual(await pollFeed(h.app.deps, bob.id), { created: 1, canceled: 1 });
    const rows = await ofShared();
    const byTimeAndStatus = (a: Array<string | number>, b: Array<string | number>) =>
      Number(a[0]) - Number(b[0]) || String(a[1]).localeCompare(String(b[1]));
    assert.deepEqual(
      rows.map((r) => [r.join_at.getTime(), r.status]).sort(byTimeAndStatus),
      [
        [start.getTime(), 'canceled'],
        [start.getTime(), 'pending'],
        [later.getTime(), 'canceled'],
      ].sort(byTimeAndStatus),
    );
    const atStart = rows.filter((r) => r.join_at.getTime() === start.getTime());
    const oldRow = atStart.find((r) => r.status === 'canceled');
    const newRow = atStart.find((r) => r.status === 'pending');
    assert.notEqual(oldRow!.id, newRow!.id, 'a new recording, so a new idempotency key and new bot metadata');

    // A copy asked for through the API holds the recording when the feed drops it.
    const viaApi = await h.request('POST', '/v1/calendar-events', {
      title: 'Planning',
      start: start.toISOString(),
      end: new Date(start.getTime() + 30 * 60_000).toISOString(),
      meetingUrl: 'https://meet.google.com/sha-redx-abc#join',
    });
    assert.equal(viaApi.status, 200, viaApi.text);
    assert.equal(viaApi.json.duplicate, true);
    assert.equal(viaApi.json.recording.id, newRow!.id);
    bodies.set('/bob.ics', calendar([]));
    assert.deepEqual(await pollFeed(h.app.deps, bob.id), { created: 0, canceled: 0 });
    assert.equal((await ofShared()).find((r) => r.id === newRow!.id)!.status, 'pending');
  });

  void it('R1: bot recording switched off for a workspace cancels its unstarted recordings and makes none; switched back on, the feeds make them again', async () => {
    status = 200;
    const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 50 * HOUR);
    const link = 'https://acme.zoom.us/j/8080';
    bodies.set('/carol.ics', calendar([vevent('retro', start, [`LOCATION:${link}`])]));
    const base = url.replace('/team.ics', '');
    const carol = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/carol.ics` });
    assert.equal((await pollFeed(h.app.deps, carol.id)).created, 1);
    const ofLink = async () => (await recordings()).filter((r) => r.meeting_url === link);

    assert.deepEqual((await h.request('GET', '/v1/bot-settings')).json, { enabled: true });
    const off = await h.request('PUT', '/v1/bot-settings', { enabled: false });
    assert.equal(off.status, 200, off.text);
    assert.ok(off.json.canceled >= 1);
    assert.deepEqual(
      (await ofLink()).map((r) => r.status),
      ['canceled'],
    );
    assert.equal((await pollFeed(h.app.deps, carol.id)).created, 0, 'nothing is made while off');
    const refused = await h.request('POST', '/v1/calendar-events', {
      start: start.toISOString(),
      end: new Date(start.getTime() + HOUR).toISOString(),
      meetingUrl: 'https://acme.zoom.us/j/9090',
    });
    assert.equal(refused.status, 200);
    assert.equal(refused.json.recording, null);
    assert.equal(refused.json.skipped, 'workspace_bot_recording_disabled');
    const bad = await h.request('PUT', '/v1/bot-settings', { enabled: 'no' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'settings.enabled');

    assert.equal((await h.request('PUT', '/v1/bot-settings', { enabled: true })).json.enabled, true);
    assert.equal((await pollFeed(h.app.deps, carol.id)).created, 1, 'the feed makes it again');
    assert.deepEqual((await ofLink()).map((r) => r.status).sort(), ['canceled', 'pending']);
  });

  void it('R1/X1: feeds are listed with their last error and a redacted address, and unsubscribing cancels what only they held; a meeting whose bot is in the call is never given a second recording when it moves', async () => {
    status = 200;
    const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 70 * HOUR);
    const link = 'https://acme.zoom.us/j/4242';
    const secretPath = '/private-3f9a8c7d6e5b4a39281706f5e4d3c2b1/basic.ics';
    bodies.set(secretPath, calendar([vevent('sync', start, [`LOCATION:${link}`])]));
    const base = url.replace('/team.ics', '');
    const dave = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}${secretPath}` });
    assert.ok(!JSON.stringify(dave).includes('3f9a8c7d6e5b4a39281706f5e4d3c2b1'), 'the secret is not echoed');
    assert.equal((await pollFeed(h.app.deps, dave.id)).created, 1);
    const listed = await h.request('GET', '/v1/calendar-feeds');
    assert.equal(listed.status, 200);
    type FeedView = { id: string; lastPolledAt: string | null; lastError: string | null };
    const feeds = listed.json.feeds as FeedView[];
    const mine = feeds.find((f) => f.id === dave.id)!;
    assert.ok(mine.lastPolledAt);
    assert.equal(mine.lastError, null);
    assert.ok(!listed.text.includes('3f9a8c7d6e5b4a39281706f5e4d3c2b1'), 'nor listed');
    const old = feeds.find((f) => f.lastError !== null)!;
    assert.match(old.lastError ?? '', /HTTP 500/, 'the feed that failed earlier says why');

    // The bot is in the call; the organiser moves the meeting: no second bot for the same call.
    const [rec] = (await recordings()).filter((r) => r.meeting_url === link);
    await h.app.database.db
      .updateTable('bot_recordings')
      .set({ status: 'in_call' })
      .where('id', '=', rec!.id)
      .execute();
    bodies.set(
      secretPath,
      calendar([vevent('sync', new Date(start.getTime() + HOUR), [`LOCATION:${link}`])]),
    );
    assert.deepEqual(await pollFeed(h.app.deps, dave.id), { created: 0, canceled: 0 });
    assert.deepEqual(
      (await recordings()).filter((r) => r.meeting_url === link).map((r) => r.status),
      ['in_call'],
    );

    // Unsubscribing: the feed and its events go; its only-held, unstarted recordings are canceled.
    const later = new Date(start.getTime() + 5 * HOUR);
    bodies.set(
      secretPath,
      calendar([
        vevent('sync', new Date(start.getTime() + HOUR), [`LOCATION:${link}`]),
        vevent('later', later, [`LOCATION:${link}/9`]),
      ]),
    );
    assert.equal((await pollFeed(h.app.deps, dave.id)).created, 1);
    const removed = await h.request('DELETE', `/v1/calendar-feeds/${dave.id}`);
    assert.equal(removed.status, 200, removed.text);
    assert.equal(removed.json.canceled, 1);
    assert.equal((await recordings()).find((r) => r.meeting_url === `${link}/9`)!.status, 'canceled');
    assert.equal((await h.request('DELETE', `/v1/calendar-feeds/${dave.id}`)).status, 404);
  });

  void it('R1: a recording a user canceled stays canceled when the meeting is posted or polled again; "record": true brings it back', async () => {
    status = 200;
    const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 90 * HOUR);
    const event = {
      title: 'Board',
      start: start.toISOString(),
      end: new Date(start.getTime() + HOUR).toISOString(),
      meetingUrl: 'https://acme.zoom.us/j/5151',
    };
    const created = await h.request('POST', '/v1/calendar-events', event);
    assert.equal(created.status, 201, created.text);
    const id = created.json.recording.id as string;
    assert.equal((await h.request('POST', `/v1/bot-recordings/${id}/cancel`)).status, 202);

    const again = await h.request('POST', '/v1/calendar-events', event);
    assert.equal(again.status, 200);
    assert.equal(again.json.recording.id, id, 'the canceled recording, not a new one');
    assert.equal(again.json.recording.status, 'canceled');
    const base = url.replace('/team.ics', '');
    bodies.set('/erin.ics', calendar([vevent('board', start, [`LOCATION:${event.meetingUrl}`], 60)]));
    const erin = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/erin.ics` });
    assert.equal(
      (await pollFeed(h.app.deps, erin.id)).created,
      0,
      "another attendee's copy does not revive it",
    );

    const forced = await h.request('POST', '/v1/calendar-events', { ...event, record: true });
    assert.equal(forced.status, 201, forced.text);
    assert.notEqual(forced.json.recording.id, id);
    assert.equal(forced.json.recording.status, 'pending');
  });

  void it('R1: two feeds dropping their copies of one meeting at the same moment cancel it (the release is serialized on the recording)', async () => {
    status = 200;
    const base = url.replace('/team.ics', '');
    for (let round = 0; round < 5; round++) {
      const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + (100 + round) * HOUR);
      const link = `https://meet.google.com/con-curr-en${round}`;
      bodies.set(`/f${round}a.ics`, calendar([vevent(`a${round}`, start, [`LOCATION:${link}`])]));
      bodies.set(`/f${round}b.ics`, calendar([vevent(`b${round}`, start, [`LOCATION:${link}`])]));
      const a = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/f${round}a.ics` });
      const b = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/f${round}b.ics` });
      await pollFeed(h.app.deps, a.id);
      await pollFeed(h.app.deps, b.id);
      bodies.set(`/f${round}a.ics`, calendar([]));
      bodies.set(`/f${round}b.ics`, calendar([]));
      const [ra, rb] = await Promise.all([pollFeed(h.app.deps, a.id), pollFeed(h.app.deps, b.id)]);
      assert.equal(ra.canceled + rb.canceled, 1, `round ${round}: exactly one of them cancels it`);
      const rows = (await recordings()).filter((r) => r.meeting_url === link);
      assert.deepEqual(
        rows.map((r) => r.status),
        ['canceled'],
        `round ${round}: nobody holds it, so it is canceled`,
      );
    }
  });
  void it('R10: one call, one recording across the API and the feeds: a feed copy at an overlapping time is the recording the API made, and posts and polls at once make no second', async () => {
    status = 200;
    const base = url.replace('/team.ics', '');
    const start = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 120 * HOUR);
    const link = 'https://meet.google.com/one-call-xyz';
    const posted = await h.request('POST', '/v1/calendar-events', {
      title: 'Planning',
      start: start.toISOString(),
      end: new Date(start.getTime() + HOUR).toISOString(),
      meetingUrl: link,
    });
    assert.equal(posted.status, 201, posted.text);
    const id = posted.json.recording.id as string;
    // The same meeting in an attendee's calendar, a quarter hour later (a stale copy, or a nudge).
    const later = new Date(start.getTime() + HOUR / 4);
    bodies.set('/frank.ics', calendar([vevent('planning', later, [`LOCATION:${link}`], 60)]));
    const frank = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/frank.ics` });
    assert.equal((await pollFeed(h.app.deps, frank.id)).created, 0, 'no second recording for the call');
    const onLink = async () =>
      (await recordings()).filter((r) => r.meeting_url === link && r.status !== 'canceled');
    assert.deepEqual(
      (await onLink()).map((r) => r.id),
      [id],
    );
    // The API's copy moving within the call now keeps the recording the feed also holds.
    const nudged = await h.request('POST', '/v1/calendar-events', {
      title: 'Planning',
      start: new Date(start.getTime() + HOUR / 2).toISOString(),
      end: new Date(start.getTime() + 90 * 60_000).toISOString(),
      meetingUrl: link,
    });
    assert.equal(nudged.status, 200, nudged.text);
    assert.equal(nudged.json.recording.id, id);

    // Another link: API posts and two feeds' polls, all at once, for overlapping times of one call.
    const link2 = 'https://meet.google.com/one-call-abc';
    const s2 = new Date(start.getTime() + 24 * HOUR);
    bodies.set(
      '/gina.ics',
      calendar([vevent('retro', new Date(s2.getTime() + 10 * 60_000), [`LOCATION:${link2}`])]),
    );
    bodies.set(
      '/hal.ics',
      calendar([vevent('retro-h', new Date(s2.getTime() + 20 * 60_000), [`LOCATION:${link2}`])]),
    );
    const gina = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/gina.ics` });
    const hal = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/hal.ics` });
    const post = (offsetMin: number) =>
      h.request('POST', '/v1/calendar-events', {
        title: 'Retro',
        start: new Date(s2.getTime() + offsetMin * 60_000).toISOString(),
        end: new Date(s2.getTime() + (offsetMin + 30) * 60_000).toISOString(),
        meetingUrl: link2,
      });
    const results = await Promise.all([
      post(0),
      pollFeed(h.app.deps, gina.id),
      post(5),
      pollFeed(h.app.deps, hal.id),
      post(15),
    ]);
    for (const r of results) if ('status' in r) assert.ok(r.status === 200 || r.status === 201, r.text);
    const active = (await recordings()).filter((r) => r.meeting_url === link2 && r.status !== 'canceled');
    assert.equal(active.length, 1, `one recording for the call: ${JSON.stringify(active)}`);

    // Two back-to-back meetings in one personal room; the first runs long and now overlaps the
    // second. Its own recording keeps it (only the end moved), and deleting it cancels its own.
    const room = 'https://acme.zoom.us/j/7777';
    const s3 = new Date(start.getTime() + 48 * HOUR);
    const first = (minutes: number) => vevent('first', s3, [`LOCATION:${room}`], minutes);
    const second = vevent('second', new Date(s3.getTime() + 20 * 60_000), [`LOCATION:${room}`]);
    bodies.set('/ivy.ics', calendar([first(15), second]));
    const ivy = await addCalendarFeed(h.app.deps, h.workspaceId, { url: `${base}/ivy.ics` });
    assert.equal((await pollFeed(h.app.deps, ivy.id)).created, 2);
    const inRoom = async () =>
      (await recordings()).filter((r) => r.meeting_url === room && r.status !== 'canceled');
    const [r1, r2] = await inRoom();
    bodies.set('/ivy.ics', calendar([first(30), second]));
    assert.deepEqual(await pollFeed(h.app.deps, ivy.id), { created: 0, canceled: 0 });
    const copy = await h.app.database.db
      .selectFrom('calendar_events')
      .select('recording_id')
      .where('feed_id', '=', ivy.id)
      .where('uid', '=', 'first')
      .executeTakeFirstOrThrow();
    assert.equal(copy.recording_id, r1!.id, 'the copy keeps its own recording, not its neighbour');
    bodies.set('/ivy.ics', calendar([second]));
    assert.deepEqual(await pollFeed(h.app.deps, ivy.id), { created: 0, canceled: 1 });
    assert.deepEqual(
      (await inRoom()).map((r) => r.id),
      [r2!.id],
      'the deleted meeting lost its recording; the other kept its own',
    );
  });
});
