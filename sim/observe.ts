/**
 * What the oracle needs, read after quiescence: the clients' view of what was accepted, the final
 * transcripts through the API, and the database's and the blob store's settled state.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { TEMP_PREFIX } from '../src/adapters/local-blob-store.ts';
import { BOT_MARK, type BotWorld } from './bots.ts';
import type { History, MeetingObservation } from './oracle.ts';
import type { ClientMeeting } from './run.ts';

export async function observe(ctx: {
  dbUrl: string;
  dataDir: string;
  apiPorts: number[];
  apiKey: string;
  meetings: ClientMeeting[];
  unexpected: History['unexpectedExits'];
  webhooks: History['webhooks'];
  bots: BotWorld;
}): Promise<History> {
  const db = new pg.Client({ connectionString: ctx.dbUrl });
  await db.connect();
  try {
    const q = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
      (await db.query<T>(text, values)).rows;
    const meetings: MeetingObservation[] = [];
    const botMeetings = new Set<string>();
    for (const client of ctx.meetings) {
      let c = client;
      let row: { status: string; failure_code: string | null } | undefined;
      if (c.kind === 'bot') {
        // A bot meeting is known by its recording; the meeting is the one its audio was imported into.
        const [rec] = await q<{ status: string; failure_code: string | null; meeting_id: string | null }>(
          'select status, failure_code, meeting_id from bot_recordings where id = $1',
          [c.id],
        );
        const samples = ctx.bots.recorded.get(c.id);
        c = { ...c, accepted: samples ? new Map([[BOT_MARK, samples]]) : new Map() };
        if (rec?.meeting_id) {
          botMeetings.add(rec.meeting_id);
          c = { ...c, id: rec.meeting_id };
        } else {
          // No meeting: the recording's own end is the outcome (no audio, or a failure with its reason).
          const ended = ['complete', 'failed', 'canceled', 'not_recorded'].includes(rec?.status ?? '');
          row = {
            status: !rec ? 'gone' : ended ? (rec.status === 'complete' ? 'complete' : 'failed') : rec.status,
            failure_code: rec?.failure_code ?? null,
          };
          c = { ...c, noMeeting: true };
        }
      }
      row ??= (
        await q<{ status: string; failure_code: string | null }>(
          'select status, failure_code from meetings where id = $1',
          [c.id],
        )
      )[0];
      let segments: MeetingObservation['segments'] = [];
      if (row && !c.deleted) {
        const res = await fetch(`http://127.0.0.1:${ctx.apiPorts[0]}/v1/meetings/${c.id}/transcript`, {
          headers: { authorization: `Bearer ${ctx.apiKey}` },
        });
        if (res.ok) segments = ((await res.json()) as { segments: MeetingObservation['segments'] }).segments;
      }
      const [left] = await q<{ n: number }>(
        `select (select count(*) from blobs where meeting_id = $1 and deleted_at is null)
              + (select count(*) from object_cleanups where meeting_id = $1) as n`,
        [c.id],
      );
      // The windows each deleted blob was heard in, and when each settled. A window that failed
      // audio.deleted never settled (its words are lost: that is what V4 looks for). Positions are
      // compared only for live windows: a superseded window keeps the positions it had before the
      // repair moved the chunks, so comparing them with the chunks' final positions is meaningless
      // (found by the soak: two false alarms).
      const deletions = await q<{ blob: string; at: Date; settled: Array<Date | null> }>(
        `select b.id as blob, b.deleted_at as at,
                array(select case when w.failure_code = 'audio.deleted' then null
                                  else coalesce(w.transcribed_at, w.failed_at, w.missing_at) end
                       from windows w
                       where w.meeting_id = b.meeting_id and w.created_at <= b.deleted_at
                         and (w.blob_id = b.id
                              or w.superseded_at is null and (w.blob_id is null or w.blob_id <> b.id) and exists (
                                select 1 from chunks ch where (ch.blob_id = b.id or ch.pcm_blob_id = b.id)
                                  and ch.start_samples is not null
                                  and ch.start_samples < w.end_samples
                                  and ch.start_samples + coalesce(ch.samples, 0) > w.start_samples)
                              or not exists (select 1 from windows x where x.blob_id = b.id)
                                 and not exists (select 1 from chunks ch where ch.blob_id = b.id or ch.pcm_blob_id = b.id))
                         and (w.superseded_at is null or w.superseded_at > b.deleted_at)) as settled
           from blobs b where b.meeting_id = $1 and b.deleted_at is not null`,
        [c.id],
      );
      meetings.push({
        id: c.id,
        label: c.format ? `${c.scenario} ${c.format}` : c.scenario,
        lossy: c.lossy,
        noMeeting: c.noMeeting,
        kind: c.kind,
        deleted: c.deleted || !row,
        expectFailure: c.expectFailure,
        accepted: c.accepted,
        unanswered: c.unanswered,
        canceled: c.canceled,
        regenerations: c.regenerations,
        status: row?.status ?? 'gone',
        failureCode: row?.failure_code ?? null,
        segments,
        audioObjectsLeft: Number(left?.n ?? 0),
        deletions: deletions.map((d) => ({
          blob: d.blob,
          at: d.at.getTime(),
          windowsSettledAt: d.settled.map((t) => (t ? new Date(t).getTime() : null)),
        })),
      });
    }
    const known = new Set([...ctx.meetings.map((m) => m.id), ...botMeetings]);
    const all = await q<{ id: string }>('select id from meetings');
    const unknownMeetings = all.filter((m) => !known.has(m.id)).map((m) => m.id);

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
    const segs = await q<{ key: string; n: number }>(
      `select window_id || '/' || seq as key, count(*)::int as n from segments group by window_id, seq having count(*) > 1`,
    );
    const [ledger] = await q<{ bytes: string }>(
      `select (select coalesce(sum(size_bytes), 0) from blobs where deleted_at is null)
            + (select coalesce(sum(bytes), 0) from object_cleanups) as bytes`,
    );
    // Each bot recording left unsettled, told in full: what moved it, what its webhooks did, and
    // what the provider says of its bot. Printed only when the run fails, so it can be read.
    const botTrails: string[] = [];
    const unsettled = await q<{ id: string; status: string; bot_id: string | null; ends_at: Date }>(
      `select id, status, bot_id, ends_at from bot_recordings
        where status not in ('complete', 'failed', 'canceled', 'not_recorded') order by created_at`,
    );
    for (const r of unsettled) {
      const at = (d: Date) => new Date(d).toISOString().slice(11, 23);
      botTrails.push(
        `bot recording ${r.id}: ${r.status}, bot ${r.bot_id ?? '(none)'}, ends ${at(r.ends_at)}`,
      );
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
      for (const bot of ctx.bots.fake.bots().filter((b) => b.metadata['verbatim_recording'] === r.id))
        botTrails.push(
          `    provider bot ${bot.id}: ${bot.statusChanges.map((c) => `${c.code}@${c.created_at.slice(11, 23)}`).join(' ')}`,
        );
    }
    return {
      botTrails,
      meetings,
      unknownMeetings,
      webhooks: ctx.webhooks,
      stuck: Object.fromEntries(Object.entries(stuck ?? {}).map(([k, v]) => [k, Number(v)])),
      effects: {
        staleCommits: stale.map((r) => r.id),
        segmentsPerWindowSeq: new Map(segs.map((r) => [r.key, r.n])),
        botsPerRecording: ctx.bots.botsPerRecording(),
      },
      providerCalls: ctx.bots.calls(),
      ledgerBytes: Number(ledger?.bytes ?? 0),
      storeBytes: storeBytes(path.join(ctx.dataDir, 'blobs')),
      unexpectedExits: ctx.unexpected,
    };
  } finally {
    await db.end();
  }
}

/** Bytes of the objects in a local blob store (temporaries of writes in flight excluded). */
function storeBytes(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += storeBytes(full);
    else if (!entry.name.startsWith(TEMP_PREFIX)) total += fs.statSync(full).size;
  }
  return total;
}
