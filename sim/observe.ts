/**
 * What the oracle needs, gathered after quiescence from witnesses outside the service (V11): what
 * each client was answered, the meetings, recordings and transcripts as the API gives them to a
 * client, what the provider fakes and the webhook receiver saw, and what is physically in the store.
 * Only two things are read from the service's own tables, because nothing outside can show them:
 * the queues a quiet system must have emptied (V3), and attempts that committed under a stale
 * token without doubling any effect a witness could see (V5).
 */
import pg from 'pg';
import type { BotWorld } from './bots.ts';
import type { ClientMeeting } from './clients.ts';
import type { FairWait, History, MeetingObservation, RequestRecord } from './history.ts';
import type { FakeProvider } from './providers.ts';
import type { StoreWatcher } from './store.ts';

export async function observe(ctx: {
  dbUrl: string;
  apiPorts: number[];
  apiKey: string;
  metricsToken: string;
  meetings: ClientMeeting[];
  requests: RequestRecord[];
  unexpected: History['unexpectedExits'];
  webhooks: History['webhooks'];
  bots: BotWorld;
  speech: FakeProvider;
  chat: FakeProvider;
  store: StoreWatcher;
  /** F5 (V13): the tenant under test and the noisy one, by workspace id. */
  fair?: { quiet: string; noisy: string; slots: number; faultSpans: Array<[number, number]> };
}): Promise<History> {
  const api = apiReader(ctx.apiPorts, ctx.apiKey);

  const meetings: MeetingObservation[] = [];
  const botMeetings = new Set<string>();
  for (const client of ctx.meetings) meetings.push(await observeMeeting(client, api, ctx.bots, botMeetings));

  // Every meeting the API lists, to find one no client made.
  const listed: string[] = [];
  for (let cursor: string | null = null, pages = 0; pages < 100; pages++) {
    const page = await api(`/v1/meetings?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    for (const m of (page.json?.meetings as Array<{ id: string }> | undefined) ?? []) listed.push(m.id);
    cursor = typeof page.json?.nextCursor === 'string' ? page.json.nextCursor : null;
    if (!cursor) break;
  }
  const known = new Set([...ctx.meetings.map((m) => m.id), ...botMeetings]);
  const unknownMeetings = listed.filter((id) => !known.has(id));

  // The ledger as an operator reads it (B9's gauge), against the bytes physically in the store.
  const metrics = await api('/metrics', { authorization: `Bearer ${ctx.metricsToken}` });
  const gauge = /^verbatim_stored_bytes(?:\{[^}]*\})? (\S+)$/m.exec(metrics.text);
  const ledgerBytes = metrics.status === 200 && gauge ? Number(gauge[1]) : null;
  ctx.store.present(); // a last scan, so every object that left is marked gone
  const storeBytes = ctx.store.bytesNow();

  const db = new pg.Client({ connectionString: ctx.dbUrl });
  await db.connect();
  try {
    const q = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
      (await db.query<T>(text, values)).rows;
    const [stuck] = await q<Record<string, string>>(`select
        (select count(*) from jobs where status in ('pending', 'running')) as "jobs waiting or running",
        (select count(*) from job_attempts where status = 'running') as "attempts running",
        (select count(*) from outbox where delivered_at is null) as "outbox undelivered",
        (select count(*) from object_cleanups) as "cleanups left",
        (select count(*) from webhook_deliveries where status = 'pending') as "webhook deliveries pending",
        (select count(*) from webhook_deliveries where status = 'failed'
            and last_error is distinct from 'meeting deleted') as "webhook deliveries given up",
        (select count(*) from bot_recordings where status not in ('complete', 'failed', 'canceled', 'not_recorded'))
          as "bot recordings unsettled",
        (select count(*) from graphile_worker._private_jobs where locked_at is not null) as "transport jobs locked",
        (select count(*) from windows where pending_at_publication) as "late windows not published",
        (select count(*) from meetings where untranscribed_in_flight > 0) as "meetings counting windows in flight"`);
    const stale = await q<{ id: string }>(
      `select a.id from job_attempts a
        where a.status = 'completed'
          and exists (select 1 from job_attempts later where later.job_id = a.job_id
                       and later.attempt_no > a.attempt_no and later.started_at < a.ended_at)`,
    );
    // A window's words committed by a worker that held no attempt of its meeting's jobs: neither
    // one it closed in that same transaction (the audit row and the closed attempt share its xmin)
    // nor one running at that moment (a close-out transcribing the last stretch itself). Written
    // under a stale token (J3), whether or not it doubled anything.
    const staleWindows = await q<{ window_id: string; actor: string; at: Date }>(
      `select e.subject_id as window_id, e.actor, e.at from audit_events e
         join windows w on w.id::text = e.subject_id
        where e.subject_type = 'window' and e.to_status = 'transcribed' and e.actor like 'worker:%'
          and not exists (
            select 1 from job_attempts a join jobs j on j.id = a.job_id
             where a.owner = substr(e.actor, 8) and j.meeting_id = w.meeting_id
               and (a.xmin = e.xmin or a.started_at <= e.at and (a.ended_at is null or a.ended_at >= e.at)))`,
    );
    const botTrails = await readBotTrails(q, ctx.bots);
    // The windows each meeting gave up on (failed, with their reasons): read only to explain a
    // loss the oracle found from outside.
    const windowTrails = await q<{
      meeting_id: string;
      index: number;
      failure_code: string;
      failure_message: string | null;
    }>(
      `select meeting_id, index, failure_code, failure_message from windows
        where failure_code is not null and superseded_at is null order by meeting_id, index`,
    );
    // Jobs left after quiescence: each with its tries and the last failure, to read a V3 (or the V1
    // behind it) from the run's own output.
    const jobTrails = await q<{ line: string }>(
      `select format('job %s %s of meeting %s: %s tries, last %s: %s', j.kind, j.status, j.meeting_id,
                     (select count(*) from job_attempts a where a.job_id = j.id),
                     coalesce(l.status, '-'), left(coalesce(l.error_code || ' ' || l.error_message, '-'), 300)) as line
         from jobs j
         left join lateral (select a.status, a.error_code, a.error_message from job_attempts a
                             where a.job_id = j.id and a.error_code is not null
                             order by a.attempt_no desc limit 1) l on true
        where j.status in ('pending', 'running') order by j.created_at limit 20`,
    );
    const fairWaits = ctx.fair ? await observeFairWaits(q, ctx.fair) : null;
    return {
      ...(ctx.fair && fairWaits
        ? { fairWaits: { slots: ctx.fair.slots, ...fairWaits, faultSpans: ctx.fair.faultSpans } }
        : {}),
      jobTrails: jobTrails.map((j) => j.line),
      botTrails,
      windowTrails: windowTrails.map(
        (w) =>
          `meeting ${w.meeting_id} window ${w.index}: ${w.failure_code} (${(w.failure_message ?? '').slice(0, 160)})`,
      ),
      meetings,
      unknownMeetings,
      webhooks: ctx.webhooks,
      stuck: Object.fromEntries(Object.entries(stuck ?? {}).map(([k, v]) => [k, Number(v)])),
      effects: {
        staleCommits: [
          ...stale.map((r) => `attempt ${r.id}`),
          ...staleWindows.map(
            (w) => `window ${w.window_id} (${w.actor} at ${new Date(w.at).toISOString().slice(11, 23)})`,
          ),
        ],
        botsPerRecording: ctx.bots.botsPerRecording(),
      },
      providerCalls: ctx.bots.calls(),
      providerLogs: [
        { provider: 'speech', calls: ctx.speech.log },
        { provider: 'chat', calls: ctx.chat.log },
      ],
      store: [...ctx.store.objects.values()],
      ledgerBytes,
      storeBytes,
      unexpectedExits: ctx.unexpected,
      requests: ctx.requests,
    };
  } finally {
    await db.end();
  }
}

interface ApiAnswer {
  status: number;
  json: { [k: string]: unknown } | null;
  text: string;
}
type ApiRead = (url: string, headers?: Record<string, string>) => Promise<ApiAnswer>;

/** Reads the API after quiescence; a slow answer is asked again on the other api process. */
function apiReader(ports: number[], apiKey: string): ApiRead {
  return async (url: string, headers: Record<string, string> = {}): Promise<ApiAnswer> => {
    // An answer after quiescence; a slow one is asked again on the other api process.
    for (let i = 0; ; i++) {
      try {
        const res = await fetch(`http://127.0.0.1:${ports[i % ports.length]}${url}`, {
          headers: { authorization: `Bearer ${apiKey}`, ...headers },
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        if (res.status >= 500 && i < 5) continue;
        let json: { [k: string]: unknown } | null = null;
        try {
          json = JSON.parse(text) as { [k: string]: unknown };
        } catch {
          json = null;
        }
        return { status: res.status, json, text };
      } catch (err) {
        if (i >= 5) return { status: 0, json: null, text: String(err) };
      }
    }
  };
}

/** What became of one client's meeting, read through the API (a bot's through its recording). */
async function observeMeeting(
  client: ClientMeeting,
  api: ApiRead,
  bots: BotWorld,
  botMeetings: Set<string>,
): Promise<MeetingObservation> {
  let id = client.id;
  let number = client.number;
  let accepted = client.accepted;
  let status = 'lost';
  let failureCode: string | null = null;
  let noMeeting = false;
  let speakerOf: Record<number, string> | undefined;
  if (client.kind === 'bot') {
    // A bot meeting is known by its recording; the meeting is the one its audio was imported into.
    const rec = await api(`/v1/bot-recordings/${client.id}`);
    const recorded = bots.recorded.get(client.id);
    number = recorded?.number ?? -1;
    accepted = recorded ? new Map(recorded.marks) : new Map();
    if (recorded?.speakers) speakerOf = Object.fromEntries(recorded.speakers);
    const meetingId = typeof rec.json?.meetingId === 'string' ? rec.json.meetingId : null;
    if (rec.status === 200 && meetingId) {
      botMeetings.add(meetingId);
      id = meetingId;
    } else if (rec.status === 200) {
      // No meeting: the recording's own end is the outcome (no audio, or a failure with its reason).
      const s = String(rec.json?.status);
      status = ['complete', 'failed', 'canceled', 'not_recorded'].includes(s)
        ? s === 'complete'
          ? 'complete'
          : 'failed'
        : s;
      failureCode = (rec.json?.failure as { code?: string } | null)?.code ?? null;
      noMeeting = true;
    }
  }
  let segments: MeetingObservation['segments'] = null;
  let transcriptError: string | undefined;
  if (!noMeeting && !client.deleted) {
    const view = await api(`/v1/meetings/${id}`);
    if (view.status === 200) {
      status = String(view.json?.status);
      failureCode = (view.json?.failure as { code?: string } | null)?.code ?? null;
      const t = await api(`/v1/meetings/${id}/transcript`);
      if (t.status === 200 && Array.isArray(t.json?.segments))
        segments = t.json.segments as NonNullable<MeetingObservation['segments']>;
      else transcriptError = `${t.status}: ${t.text.slice(0, 200)}`;
    } else if (view.status !== 404) status = `unreadable (${view.status})`;
  }
  return {
    id,
    number,
    label: client.format ? `${client.scenario} ${client.format}` : client.scenario,
    lossy: client.lossy,
    noMeeting,
    kind: client.kind,
    deleted: client.deleted,
    expectFailure: client.expectFailure,
    accepted,
    unanswered: client.unanswered,
    canceled: client.canceled,
    regenerations: client.regenerations,
    ...(client.tracks ? { tracks: true } : {}),
    ...(speakerOf ? { speakerOf } : {}),
    status: client.deleted ? 'deleted' : status,
    failureCode,
    segments,
    ...(transcriptError ? { transcriptError } : {}),
  };
}

type Query = <T extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<T[]>;

/**
 * Each bot recording left unsettled, told in full: what moved it, what its webhooks did, and what
 * the provider says of its bot. Printed only when the run fails, so it can be read.
 */
async function readBotTrails(q: Query, bots: BotWorld): Promise<string[]> {
  const botTrails: string[] = [];
  const unsettled = await q<{ id: string; status: string; bot_id: string | null; ends_at: Date }>(
    `select id, status, bot_id, ends_at from bot_recordings
      where status not in ('complete', 'failed', 'canceled', 'not_recorded') order by created_at`,
  );
  for (const r of unsettled) {
    const at = (d: Date) => new Date(d).toISOString().slice(11, 23);
    botTrails.push(`bot recording ${r.id}: ${r.status}, bot ${r.bot_id ?? '(none)'}, ends ${at(r.ends_at)}`);
    const audit = await q<{
      at: Date;
      from_status: string | null;
      to_status: string;
      actor: string;
      reason: string | null;
    }>(
      `select at, from_status, to_status, actor, reason from audit_events
        where subject_type = 'bot_recording' and subject_id = $1 order by at, id`,
      [r.id],
    );
    for (const a of audit)
      botTrails.push(
        `    ${at(a.at)} ${a.from_status ?? '-'} → ${a.to_status} by ${a.actor}: ${a.reason ?? ''}`,
      );
    const hooks = await q<{
      received_at: Date;
      id: string;
      bot_id: string | null;
      code: string | null;
      outcome: string;
    }>(
      `select received_at, id, bot_id, code, outcome from provider_webhook_events
        where recording_id = $1 or bot_id = $2 order by received_at, id`,
      [r.id, r.bot_id ?? ''],
    );
    for (const h of hooks)
      botTrails.push(
        `    ${at(h.received_at)} webhook ${h.id} bot ${h.bot_id ?? '-'} ${h.code ?? '-'} → ${h.outcome}`,
      );
    for (const bot of bots.fake.bots().filter((b) => b.metadata['verbatim_recording'] === r.id)) {
      botTrails.push(
        `    provider bot ${bot.id}: ${bot.statusChanges.map((c) => `${c.code}@${c.created_at.slice(11, 23)}`).join(' ')}`,
      );
      // Whether anything asked the provider about this bot (the back-fill of a lost `done` does).
      const asked = bots.fake.requests.filter((q) => q.endpoint === 'retrieve' && q.path.includes(bot.id));
      botTrails.push(`    provider bot ${bot.id}: retrieved ${asked.length} times`);
    }
    // The workspace's backstop, which back-fills a lost `done`: when it runs and who holds it.
    const backstop = await q<{
      next_run_at: Date;
      last_run_at: Date | null;
      lease_owner: string | null;
      lease_expires_at: Date | null;
    }>(
      `select b.next_run_at, b.last_run_at, b.lease_owner, b.lease_expires_at
         from bot_backstops b join bot_recordings r on r.workspace_id = b.workspace_id where r.id = $1`,
      [r.id],
    );
    for (const b of backstop)
      botTrails.push(
        `    backstop: next ${at(b.next_run_at)}, last ${b.last_run_at ? at(b.last_run_at) : '-'}, ` +
          `lease ${b.lease_owner ?? '-'} until ${b.lease_expires_at ? at(b.lease_expires_at) : '-'}`,
      );
    if (backstop.length === 0) botTrails.push('    backstop: none for its workspace');
  }
  return botTrails;
}

/**
 * F5 (V13): the quiet workspace's windows claimed once, each with the noisy workspace's window
 * claims (isolated runs aside) between its falling due and its claim, and its own workspace's
 * claimed meanwhile that were ahead of it in its lane (same class, an earlier round). It fell due at its last
 * delivery (a rescued or woken job's wait before that is not one of fairness) or its run_after,
 * whichever is later.
 */
async function observeFairWaits(
  q: <T extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<T[]>,
  fair: { quiet: string; noisy: string },
): Promise<{ waits: FairWait[]; noisyWindows: number }> {
  const [noisy] = await q<{ n: number }>(
    `select count(*)::int as n from jobs where workspace_id = $1::uuid and kind = 'transcribe-window'`,
    [fair.noisy],
  );
  const rows = await q<{
    id: string;
    live: boolean;
    due_at: number;
    claimed_at: number;
    noisy_ahead: number;
    own_ahead: number;
  }>(
    `select j.id, j.fair_class = 0 as live,
            extract(epoch from greatest(j.delivered_at, j.run_after)) * 1000 as due_at,
            extract(epoch from a.started_at) * 1000 as claimed_at,
            (select count(*) from job_attempts na join jobs nj on nj.id = na.job_id
              where nj.workspace_id = $2::uuid and nj.kind = 'transcribe-window' and nj.isolated_at is null
                and na.started_at > greatest(j.delivered_at, j.run_after) and na.started_at < a.started_at)::int
              as noisy_ahead,
            (select count(*) from job_attempts oa join jobs oj on oj.id = oa.job_id
              where oj.workspace_id = $1::uuid and oj.kind = 'transcribe-window' and oj.id <> j.id
                and oj.fair_class = j.fair_class and oj.fair_round < j.fair_round
                and oa.started_at > greatest(j.delivered_at, j.run_after) and oa.started_at < a.started_at)::int
              as own_ahead
       from jobs j join job_attempts a on a.job_id = j.id and a.attempt_no = 1
      where j.workspace_id = $1::uuid and j.kind = 'transcribe-window' and j.attempt_count = 1
        and j.isolated_at is null and j.delivered_at is not null`,
    [fair.quiet, fair.noisy],
  );
  const waits = rows.map((r) => ({
    job: r.id,
    live: r.live,
    dueAt: Number(r.due_at),
    claimedAt: Number(r.claimed_at),
    noisyAhead: r.noisy_ahead,
    ownAhead: r.own_ahead,
  }));
  return { waits, noisyWindows: noisy?.n ?? 0 };
}
