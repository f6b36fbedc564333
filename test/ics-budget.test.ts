import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import ICAL from 'ical.js';
import { sql } from 'kysely';
import { addCalendarFeed, pollFeed } from '../src/bots/calendar-feeds.ts';
import { meetingUrlOf, parseIcs, type CalendarOccurrence } from '../src/domain/ics.ts';
import { startFakeRecall, type FakeRecall } from './support/fake-recall.ts';
import { startHarness, waitFor, type Harness } from './support/harness.ts';
import { stamp, vevent } from './support/ics.ts';

/**
 * S8: one tenant's calendar cannot burn a worker's CPU. Recurring events skip ahead to the window
 * instead of walking from DTSTART, occurrences are capped per event and per feed, link extraction is
 * linear, and a feed is parsed in a thread stopped at the time budget, so the worker's sweeps keep
 * their period whatever a feed holds. An over-budget feed is refused whole as `invalid_calendar`.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const calendar = (events: string[], extra: string[] = []) =>
  [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    'PRODID:-//verbatim-test//EN',
    ...extra,
    ...events,
    'END:VCALENDAR',
  ].join('\r\n');

/** The reported event: a VEVENT of about a hundred bytes, every second since the year 2000. */
const secondly = (uid: string) =>
  [
    'BEGIN:VEVENT',
    `UID:${uid}`,
    'DTSTART:20000101T000000Z',
    'DTEND:20000101T000100Z',
    'RRULE:FREQ=SECONDLY',
    'END:VEVENT',
  ].join('\r\n');

/** A rule ical.js loops on inside one step (there is no 30 February): only stopping the thread ends it. */
const endless = (uid: string) =>
  vevent(uid, new Date('2000-01-01T00:00:00Z'), ['RRULE:FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30']);

/** A link that made `[).,;]+$` backtrack for seconds, before the call's real link. */
const PARENS = `Agenda https://example.com/notes${')'.repeat(40_000)}x and join https://acme.zoom.us/j/4242`;

// From the next midnight (UTC), not from now: a run between 09:00 and the end of the daily 09:00
// meeting below would see that day's occurrence overlap the window's start too (15, not 14).
const window14 = () => {
  const from = new Date((Math.floor(Date.now() / DAY) + 1) * DAY);
  return { from, until: new Date(from.getTime() + 14 * DAY) };
};

function rejectsAsInvalid(fn: () => unknown, reason: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof Error);
    assert.equal((err as { code?: string }).code, 'feed.invalid_calendar');
    assert.match(err.message, reason);
    return true;
  });
}

void describe('S8: calendar parsing budget (parser)', () => {
  void it('S8: a SECONDLY event from the year 2000 is handled within the budget', () => {
    const { from, until } = window14();
    const five = calendar([1, 2, 3, 4, 5].map((i) => secondly(`s${i}`)));
    const started = Date.now();
    // The time budget is out of the way: the refusal must come from the occurrence cap.
    rejectsAsInvalid(
      () => parseIcs(five, from, until, { parseMs: 600_000 }),
      /^event #1 \(FREQ=SECONDLY\) has more than 500 occurrences in the next 14 days$/,
    );
    // Walking from 2000 took 5.4 s per event; skipping ahead takes a few hundred steps.
    assert.ok(Date.now() - started < 3000, `refused in ${Date.now() - started} ms`);

    // The skip is real, not the cap cutting a walk short: a SECONDLY series from 2000 that ends
    // 100 s into the window is 800 million steps from DTSTART (the step cap is 25,000), yet it is
    // read exactly.
    const end = new Date(Math.ceil(from.getTime() / 1000) * 1000 + 100_000);
    const bounded = calendar([
      [
        'BEGIN:VEVENT',
        'UID:b',
        'DTSTART:20000101T000000Z',
        'DTEND:20000101T000001Z',
        `RRULE:FREQ=SECONDLY;UNTIL=${stamp(end)}`,
        'END:VEVENT',
      ].join('\r\n'),
    ]);
    const got = parseIcs(bounded, from, until);
    assert.ok(got.length >= 100 && got.length <= 102, `${got.length} occurrences`);
    assert.equal(got.at(-1)!.start.getTime(), end.getTime());
    for (let i = 1; i < got.length; i++)
      assert.equal(got[i]!.start.getTime() - got[i - 1]!.start.getTime(), 1000);

    // A daily meeting since 2000 is its 14 occurrences, at the series' time of day.
    const daily = parseIcs(
      calendar([vevent('d', new Date('2000-01-01T09:00:00Z'), ['RRULE:FREQ=DAILY'])]),
      from,
      until,
    );
    assert.equal(daily.length, 14);
    assert.ok(daily.every((o) => o.start.toISOString().endsWith('T09:00:00.000Z')));
  });

  void it('S8: skipping ahead to the window gives exactly the occurrences a walk from DTSTART gives', () => {
    const { from, until } = window14();
    // 400 days back: long enough to cross DST twice in Berlin, short enough to walk in a test.
    const day0 = new Date(Math.floor((from.getTime() - 400 * DAY) / DAY) * DAY);
    const ymd = (d: Date) => d.toISOString().slice(0, 10).replace(/-/g, '');
    const berlin = (d: Date, time = '090000') => `TZID=Europe/Berlin:${ymd(d)}T${time}`;
    const tz = [
      'BEGIN:VTIMEZONE',
      'TZID:Europe/Berlin',
      'BEGIN:DAYLIGHT',
      'TZOFFSETFROM:+0100',
      'TZOFFSETTO:+0200',
      'DTSTART:19700329T020000',
      'RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU',
      'END:DAYLIGHT',
      'BEGIN:STANDARD',
      'TZOFFSETFROM:+0200',
      'TZOFFSETTO:+0100',
      'DTSTART:19701025T030000',
      'RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU',
      'END:STANDARD',
      'END:VTIMEZONE',
    ];
    const series = (uid: string, rule: string, extra: string[] = []) =>
      [
        'BEGIN:VEVENT',
        `UID:${uid}`,
        `DTSTART;${berlin(day0)}`,
        `DTEND;${berlin(day0, '094500')}`,
        `RRULE:${rule}`,
        ...extra,
        'END:VEVENT',
      ].join('\r\n');
    const inWindow = (days: number) => new Date(day0.getTime() + days * DAY);
    const every3 = Math.ceil(400 / 3) * 3 + 3; // an INTERVAL=3 slot a few days into the window
    const events = [
      series('daily', 'FREQ=DAILY'),
      series('weekdays', 'FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR'),
      series('fortnight', 'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH'),
      series('hours', 'FREQ=HOURLY;INTERVAL=5'),
      series('minutes', 'FREQ=MINUTELY;INTERVAL=97'),
      series('halves', 'FREQ=DAILY;BYHOUR=9,17;BYMINUTE=0,30'),
      series('until', `FREQ=WEEKLY;UNTIL=${stamp(new Date(from.getTime() + 8 * DAY))}`),
      series('exdate', 'FREQ=DAILY;INTERVAL=3', [`EXDATE;${berlin(inWindow(every3))}`]),
      series('moved', 'FREQ=DAILY'),
      // A slot from before the window moved into it, and a slot in the window moved out.
      [
        'BEGIN:VEVENT',
        'UID:moved',
        `RECURRENCE-ID;${berlin(inWindow(395))}`,
        `DTSTART;${berlin(inWindow(401), '130000')}`,
        `DTEND;${berlin(inWindow(401), '140000')}`,
        'END:VEVENT',
        'BEGIN:VEVENT',
        'UID:moved',
        `RECURRENCE-ID;${berlin(inWindow(403))}`,
        `DTSTART;${berlin(inWindow(500))}`,
        `DTEND;${berlin(inWindow(500), '094500')}`,
        'END:VEVENT',
      ].join('\r\n'),
    ];
    const text = calendar(events, tz);
    const key = (o: CalendarOccurrence) => `${o.uid} ${o.start.toISOString()} ${o.end.toISOString()}`;
    const got = parseIcs(text, from, until).map(key).sort();
    const walked = walkFromDtstart(text, from, until).map(key).sort();
    assert.deepEqual(got, walked);
    for (const uid of [
      'daily',
      'weekdays',
      'fortnight',
      'hours',
      'minutes',
      'halves',
      'until',
      'exdate',
      'moved',
    ]) {
      assert.ok(
        got.some((k) => k.startsWith(`${uid}#`)),
        `${uid} has occurrences in the window`,
      );
    }
    assert.ok(
      got.some((k) => k.startsWith(`moved#${inWindow(395).toISOString().slice(0, 10)}`)),
      'the occurrence moved in from before the window is found',
    );
  });

  void it('S8: occurrences are capped per event and per feed, and so are the steps to reach the window', () => {
    const { from, until } = window14();
    const soon = new Date(Math.ceil(from.getTime() / HOUR) * HOUR);
    const hourly = calendar([vevent('h', soon, ['RRULE:FREQ=HOURLY'])]);
    assert.equal(parseIcs(hourly, from, until).length, 14 * 24, 'within the default caps');
    rejectsAsInvalid(
      () => parseIcs(hourly, from, until, { maxEventOccurrences: 100 }),
      /^event #1 \(FREQ=HOURLY\) has more than 100 occurrences in the next 14 days$/,
    );
    const three = calendar(['a', 'b', 'c'].map((uid) => vevent(uid, soon, ['RRULE:FREQ=DAILY'])));
    assert.equal(parseIcs(three, from, until, { maxOccurrences: 42 }).length, 42);
    rejectsAsInvalid(
      () => parseIcs(three, from, until, { maxOccurrences: 41 }),
      /^the feed has more than 41 occurrences in the next 14 days$/,
    );
    // COUNT counts from DTSTART, so this series cannot skip: about 9,800 steps to reach the window.
    const counted = calendar([
      vevent('c', new Date('2000-01-01T09:00:00Z'), ['RRULE:FREQ=DAILY;COUNT=1000000']),
    ]);
    assert.equal(parseIcs(counted, from, until).length, 14);
    rejectsAsInvalid(
      () => parseIcs(counted, from, until, { maxEventOccurrences: 100 }),
      /^event #1 \(FREQ=DAILY\) needs more than 5000 steps of its rule to reach the window$/,
    );
    // Not a calendar: the reason is ours, the feed's text is never echoed; an empty body or a lone
    // VEVENT is not a calendar with no events (which would cancel every recording the feed made).
    for (const text of [
      'BEGIN:VCALENDAR\r\ninternal-secret-line\r\nEND:VCALENDAR',
      '',
      vevent('lone', soon),
    ]) {
      rejectsAsInvalid(() => parseIcs(text, from, until), /^the feed is not an iCalendar \(ICS\) file$/);
    }
  });

  void it("S8: a feed of 8,000 events is read within the budget, and one series' exception never replaces another's occurrence", () => {
    const { from, until } = window14();
    const soon = new Date(Math.ceil(from.getTime() / HOUR) * HOUR + HOUR);
    // ical.js relates every RECURRENCE-ID vevent to every event unless told otherwise: 64 million
    // checks here (the budget is the default 5 s), and a wrong occurrence for "a" below.
    const events = [
      vevent('a', soon, ['RRULE:FREQ=DAILY', 'LOCATION:https://acme.zoom.us/j/1']),
      vevent('b', new Date(soon.getTime() + 5 * HOUR), [
        `RECURRENCE-ID:${stamp(soon)}`,
        'LOCATION:https://acme.zoom.us/j/2',
      ]),
    ];
    for (let i = 0; i < 8000; i++) {
      const extra = i % 2 === 0 ? [`RECURRENCE-ID:${stamp(new Date(from.getTime() - (i + 1) * DAY))}`] : [];
      events.push(vevent(`old-${i}`, new Date(from.getTime() - (i + 1) * DAY), extra));
    }
    const got = parseIcs(calendar(events), from, until);
    const a = got.filter((o) => o.uid.startsWith('a#'));
    assert.equal(a.length, 14);
    assert.deepEqual(a[0], {
      uid: `a#${soon.toISOString()}`,
      title: 'a',
      start: soon,
      end: new Date(soon.getTime() + 30 * 60_000),
      meetingUrl: 'https://acme.zoom.us/j/1',
      canceled: false,
    });
    assert.deepEqual(
      got.filter((o) => o.uid.startsWith('b#')).map((o) => [o.start, o.meetingUrl]),
      [[new Date(soon.getTime() + 5 * HOUR), 'https://acme.zoom.us/j/2']],
      "b's exception stands alone (its series is not in the feed)",
    );
  });

  void it("S8: a link ending in 40,000 ')' is extracted in linear time", () => {
    const cases: Array<[string, string | null]> = [
      [PARENS, 'https://acme.zoom.us/j/4242'],
      [`https://acme.zoom.us/j/1${')'.repeat(40_000)}x`, `https://acme.zoom.us/j/1${')'.repeat(40_000)}x`],
      [`https://acme.zoom.us/j/1${')'.repeat(40_000)}`, 'https://acme.zoom.us/j/1'],
      [`https://acme.zoom.us/j/1${'/'.repeat(40_000)}x)`, `https://acme.zoom.us/j/1${'/'.repeat(40_000)}x`],
      [`https://acme.zoom.us/j/1${'/'.repeat(40_000)}).`, 'https://acme.zoom.us/j/1'],
    ];
    for (const [text, expected] of cases) {
      const started = Date.now();
      const got = meetingUrlOf(text);
      const ms = Date.now() - started;
      // The quadratic trims took 1.5 s (parens) and 1 s (slashes) here; linear is a few ms.
      assert.ok(ms < 500, `${ms} ms for ${text.length} characters`);
      assert.equal(got, expected === null ? null : new URL(expected).toString());
    }
  });
});

/** The reference: ical.js walking every series from DTSTART, exceptions related by UID only. */
function walkFromDtstart(text: string, from: Date, until: Date): CalendarOccurrence[] {
  const root = new ICAL.Component(ICAL.parse(text) as unknown[]);
  const masters = new Map<string, InstanceType<typeof ICAL.Event>>();
  const exceptions: Array<InstanceType<typeof ICAL.Event>> = [];
  for (const vevent of root.getAllSubcomponents('vevent')) {
    const event = new ICAL.Event(vevent, { exceptions: [], strictExceptions: true });
    if (vevent.hasProperty('recurrence-id')) exceptions.push(event);
    else masters.set(event.uid, event);
  }
  for (const e of exceptions) masters.get(e.uid)!.relateException(e);
  const out: CalendarOccurrence[] = [];
  for (const event of masters.values()) {
    const it = event.iterator();
    for (let next = it.next(); next; next = it.next()) {
      const d = event.getOccurrenceDetails(next) as unknown as {
        recurrenceId: { toJSDate(): Date };
        startDate: { toJSDate(): Date };
        endDate: { toJSDate(): Date };
      };
      const slot = d.recurrenceId.toJSDate();
      if (slot.getTime() >= until.getTime() + DAY) break;
      const start = d.startDate.toJSDate();
      const end = d.endDate.toJSDate();
      if (end > from && start < until) {
        out.push({
          uid: `${event.uid}#${slot.toISOString()}`,
          title: '',
          start,
          end,
          meetingUrl: null,
          canceled: false,
        });
      }
    }
  }
  return out;
}

/** A local calendar server: each path answers what the test last put there, and says when it was asked. */
async function startCalendarServer() {
  const bodies = new Map<string, string>();
  const askedAt = new Map<string, number>();
  const server = http.createServer((req, res) => {
    askedAt.set(req.url ?? '', Date.now());
    res.writeHead(200, { 'content-type': 'text/calendar' }).end(bodies.get(req.url ?? '') ?? '');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    bodies,
    askedAt,
    url: (path: string) => `${base}${path}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The test's calendar server speaks plain http on loopback, which the operator allows on purpose. */
const LOOPBACK_FEEDS = { VERBATIM_FEED_PLAIN_HTTP_HOSTS: '127.0.0.1', VERBATIM_EGRESS_ALLOW: '127.0.0.0/8' };

void describe('S8: calendar parsing budget (feeds)', () => {
  let h: Harness;
  let cal: Awaited<ReturnType<typeof startCalendarServer>>;

  before(async () => {
    h = await startHarness({ env: { ...LOOPBACK_FEEDS, VERBATIM_FEED_PARSE_SECONDS: '1' } });
    cal = await startCalendarServer();
  });
  after(async () => {
    await h?.close();
    await cal?.close();
  });

  void it('S8: an over-budget feed records invalid_calendar and keeps what it had', async () => {
    const db = h.app.database.db;
    const base = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 2 * HOUR);
    const good = [
      vevent('standup', base, ['LOCATION:https://acme.zoom.us/j/8101']),
      vevent('weekly', new Date(base.getTime() + HOUR), [
        'RRULE:FREQ=WEEKLY;COUNT=3',
        'LOCATION:https://acme.zoom.us/j/8102',
      ]),
    ];
    cal.bodies.set('/budget.ics', calendar(good));
    const feed = await addCalendarFeed(h.app.deps, h.workspaceId, { url: cal.url('/budget.ics') });
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 3, canceled: 0 });

    const snapshot = async () => ({
      events: await db
        .selectFrom('calendar_events')
        .select(['uid', 'recording_id', 'start_at', 'end_at', 'meeting_url'])
        .where('feed_id', '=', feed.id)
        .orderBy('uid')
        .execute(),
      recordings: await db
        .selectFrom('bot_recordings')
        .select(['id', 'status', 'join_at', 'meeting_url'])
        .where('workspace_id', '=', h.workspaceId)
        .orderBy('id')
        .execute(),
      polled: (
        await db
          .selectFrom('calendar_feeds')
          .select('last_polled_at')
          .where('id', '=', feed.id)
          .executeTakeFirstOrThrow()
      ).last_polled_at,
    });
    const lastError = async () =>
      (
        await db
          .selectFrom('calendar_feeds')
          .select('last_error')
          .where('id', '=', feed.id)
          .executeTakeFirstOrThrow()
      ).last_error;
    const before = await snapshot();
    assert.equal(before.events.length, 3);
    assert.equal(await lastError(), null);

    // The same events, one of them gone, and a SECONDLY series: refused whole, so the gone one is
    // not taken as deleted and nothing is canceled.
    cal.bodies.set('/budget.ics', calendar([good[0]!, secondly('flood')]));
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 0, canceled: 0 });
    assert.equal(
      await lastError(),
      'invalid_calendar: event #2 (FREQ=SECONDLY) has more than 500 occurrences in the next 14 days',
    );
    assert.deepEqual(await snapshot(), before);

    // A rule ical.js loops on: the thread is stopped at the budget (1 s here).
    cal.bodies.set('/budget.ics', calendar([good[0]!, endless('loop')]));
    const started = Date.now();
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 0, canceled: 0 });
    assert.equal(await lastError(), 'invalid_calendar: reading the feed took longer than 1000 ms');
    assert.ok(Date.now() - started < 60_000, 'the poll returned');
    assert.deepEqual(await snapshot(), before);

    // Back within budget, with the 40,000-paren link before the call's own: read as usual.
    cal.bodies.set(
      '/budget.ics',
      calendar([...good, vevent('parens', new Date(base.getTime() + 3 * HOUR), [`DESCRIPTION:${PARENS}`])]),
    );
    assert.deepEqual(await pollFeed(h.app.deps, feed.id), { created: 1, canceled: 0 });
    assert.equal(await lastError(), null);
    const parens = await db
      .selectFrom('calendar_events')
      .select('meeting_url')
      .where('feed_id', '=', feed.id)
      .where('uid', '=', 'parens')
      .executeTakeFirstOrThrow();
    assert.equal(parens.meeting_url, 'https://acme.zoom.us/j/4242');
  });
});

void describe('S8: calendar parsing budget (worker process)', () => {
  let fake: FakeRecall;
  let h: Harness;
  let cal: Awaited<ReturnType<typeof startCalendarServer>>;
  const PARSE_SECONDS = 4;

  before(async () => {
    fake = await startFakeRecall();
    cal = await startCalendarServer();
    h = await startHarness({
      env: {
        ...LOOPBACK_FEEDS,
        VERBATIM_RECALL_URL: fake.url,
        VERBATIM_RECALL_API_KEY: fake.apiKey,
        VERBATIM_FEED_PARSE_SECONDS: String(PARSE_SECONDS),
      },
    });
  });
  after(async () => {
    await h?.close();
    await fake?.close();
    await cal?.close();
  });

  void it("S8: while a hostile feed is parsed the worker's lease sweep keeps its period", async () => {
    const db = h.app.database.db;
    const base = new Date(Math.ceil(Date.now() / HOUR) * HOUR + 2 * HOUR);
    cal.bodies.set('/endless.ics', calendar([endless('loop')]));
    cal.bodies.set('/secondly.ics', calendar([1, 2, 3, 4, 5].map((i) => secondly(`s${i}`))));
    cal.bodies.set('/parens.ics', calendar([vevent('parens', base, [`DESCRIPTION:${PARENS}`])]));
    // Polled in this order (by next_poll_at), one after another, by the worker's provider sweep.
    const endlessFeed = await addCalendarFeed(h.app.deps, h.workspaceId, { url: cal.url('/endless.ics') });
    const secondlyFeed = await addCalendarFeed(h.app.deps, h.workspaceId, { url: cal.url('/secondly.ics') });
    const parensFeed = await addCalendarFeed(h.app.deps, h.workspaceId, { url: cal.url('/parens.ics') });
    const feedRow = (id: string) =>
      db
        .selectFrom('calendar_feeds')
        .select(['last_error', 'last_polled_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

    const worker = h.spawnWorker();
    await waitFor(
      () => `the worker to fetch the endless feed; worker output:\n${worker.output().slice(-3000)}`,
      async () => cal.askedAt.has('/endless.ics'),
      120_000,
    );

    // While the endless feed is parsed: a worker row silent for an hour is put in, and the lease
    // sweep (reclaim-expired-leases, reap-dead-workers; every 0.5 s here) must declare it dead
    // within a few periods; the worker's own heartbeat (every 0.4 s) must keep beating.
    const latencies: number[] = [];
    const staleness: number[] = [];
    while ((await feedRow(endlessFeed.id)).last_error === null) {
      const id = `s8-probe-${randomUUID()}`;
      await db
        .insertInto('workers')
        .values({ id, hostname: 'probe', pid: 0, heartbeat_at: sql<Date>`now() - interval '1 hour'` })
        .execute();
      const reaped = await waitFor(`probe ${id} to be reaped`, async () => {
        const row = await db
          .selectFrom('workers')
          .select(sql<number>`extract(epoch from declared_dead_at - started_at) * 1000`.as('ms'))
          .where('id', '=', id)
          .where('declared_dead_at', 'is not', null)
          .executeTakeFirst();
        return row ? { ms: Number(row.ms) } : null;
      });
      const beat = await db
        .selectFrom('workers')
        .select(sql<number>`extract(epoch from now() - heartbeat_at) * 1000`.as('ms'))
        .where('pid', '=', worker.pid)
        .where('stopped_at', 'is', null)
        .executeTakeFirstOrThrow();
      // Only what was measured while the parse was still running counts.
      if ((await feedRow(endlessFeed.id)).last_error === null) {
        latencies.push(reaped.ms);
        staleness.push(Number(beat.ms));
      }
    }
    const endlessError = (await feedRow(endlessFeed.id)).last_error;
    assert.equal(
      endlessError,
      `invalid_calendar: reading the feed took longer than ${PARSE_SECONDS * 1000} ms`,
    );
    assert.ok(latencies.length >= 3, `${latencies.length} sweeps observed during the parse`);
    assert.ok(
      Math.max(...latencies) < 2500,
      `dead workers reaped within ${Math.max(...latencies)} ms (period 500 ms)`,
    );
    assert.ok(
      Math.max(...staleness) < 2500,
      `heartbeat at most ${Math.max(...staleness)} ms old (period 400 ms)`,
    );

    // The other hostile feeds are handled within the budget too.
    const secondlyRow = await waitFor('the SECONDLY feed to be read', async () => {
      const row = await feedRow(secondlyFeed.id);
      return row.last_error !== null ? row : null;
    });
    assert.equal(
      secondlyRow.last_error,
      'invalid_calendar: event #1 (FREQ=SECONDLY) has more than 500 occurrences in the next 14 days',
    );
    const parensRow = await waitFor('the parens feed to be read', async () => {
      const row = await feedRow(parensFeed.id);
      return row.last_polled_at !== null ? row : null;
    });
    assert.equal(parensRow.last_error, null);
    const recording = await db
      .selectFrom('calendar_events')
      .innerJoin('bot_recordings', 'bot_recordings.id', 'calendar_events.recording_id')
      .select('bot_recordings.meeting_url')
      .where('calendar_events.feed_id', '=', parensFeed.id)
      .executeTakeFirstOrThrow();
    assert.equal(recording.meeting_url, 'https://acme.zoom.us/j/4242');
  });
});
