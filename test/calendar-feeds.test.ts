import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { addCalendarFeed, pollFeed } from '../src/bots/calendar-feeds.ts';
import { meetingUrlOf } from '../src/domain/ics.ts';
import { startHarness, type Harness } from './support/harness.ts';

const HOUR = 3_600_000;

function stamp(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

function vevent(uid: string, start: Date, extra: string[] = [], minutes = 30): string {
  return [
    'BEGIN:VEVENT',
    `UID:${uid}`,
    `DTSTAMP:${stamp(new Date())}`,
    `DTSTART:${stamp(start)}`,
    `DTEND:${stamp(new Date(start.getTime() + minutes * 60_000))}`,
    `SUMMARY:${uid}`,
    ...extra,
    'END:VEVENT',
  ].join('\r\n');
}

const calendar = (events: string[]) =>
  ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//verbatim-test//EN', ...events, 'END:VCALENDAR'].join('\r\n');

void describe('calendar feeds', () => {
  let h: Harness;
  let server: http.Server;
  let body = '';
  let status = 200;
  let url = '';

  before(async () => {
    h = await startHarness();
    server = http.createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'text/calendar' }).end(body);
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
});
