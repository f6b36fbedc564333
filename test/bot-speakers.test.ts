import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  newRecallWebhookSecret,
  sendStatusWebhook,
  startFakeRecall,
  type FakeParticipant,
  type FakeRecall,
} from './support/fake-recall.ts';
import { conversationWav, startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';

interface Line {
  startMs: number;
  endMs: number;
  text: string;
  speaker: { id: string; name: string; source: string } | null;
  speakerAttribution: string | null;
}

const ANN: FakeParticipant = { id: 100, name: 'Ann Lee' };
const BOB: FakeParticipant = { id: 200, name: 'Bob Stone' };
/** Ann re-joined: the platform reports her as a new participant object. */
const ANN_AGAIN: FakeParticipant = { id: 300, name: 'Ann Lee' };

const UTTERANCES = [
  'The quarterly budget meeting will discuss the marketing plan.',
  'We decided to hire two engineers for the new project.',
  'Alice will send the report to the finance team by Friday.',
];

/*
 * R11 end to end: the API and a real worker against the fake Recall, which serves a recording's
 * participants and speaker timeline as Recall's download schemas do. The recording is three
 * utterances by two people, one of whom re-joined in between.
 */
void describe('bot speakers: who said it, from the provider (R11)', () => {
  let fake: FakeRecall;
  let h: Harness;
  const secret = newRecallWebhookSecret();

  before(async () => {
    fake = await startFakeRecall();
    h = await startHarness({
      env: {
        VERBATIM_RECALL_URL: fake.url,
        VERBATIM_RECALL_API_KEY: fake.apiKey,
        VERBATIM_RECALL_WEBHOOK_SECRETS: secret,
      },
    });
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await fake?.close();
  });

  const send = async (botId: string, code: string, metadata: Record<string, string>) =>
    String((await sendStatusWebhook(h.api, secret, { id: botId, metadata }, code)).outcome);

  /** A bot that records `wav` and reports done; returns its recording's meeting once complete. */
  async function recordedMeeting(wav: Buffer, speakers: Parameters<FakeRecall['setSpeakers']>[1]) {
    const start = Date.now() + 20 * 60_000;
    const created = await h.request('POST', '/v1/calendar-events', {
      title: 'Planning',
      start: new Date(start).toISOString(),
      end: new Date(start + 30 * 60_000).toISOString(),
      meetingUrl: `https://meet.google.com/${randomUUID().slice(0, 3)}-${randomUUID().slice(0, 4)}`,
    });
    assert.equal(created.status, 201, created.text);
    const recordingId = created.json.recording.id as string;
    const bot = await waitFor('the provider to make the bot', async () =>
      fake.bots().find((b) => b.metadata.verbatim_recording === recordingId),
    );
    for (const code of ['joining_call', 'in_call_recording', 'call_ended']) {
      fake.pushStatus(bot.id, code);
      await send(bot.id, code, bot.metadata);
    }
    fake.setRecording(bot.id, wav);
    fake.setSpeakers(bot.id, speakers);
    fake.pushStatus(bot.id, 'done');
    assert.equal(await send(bot.id, 'done', bot.metadata), 'applied');
    const meetingId = await waitFor('the recording to get its meeting', async () => {
      const row = await h.app.database.db
        .selectFrom('bot_recordings')
        .select('meeting_id')
        .where('id', '=', recordingId)
        .executeTakeFirstOrThrow();
      return row.meeting_id;
    });
    const meeting = await waitForMeeting(h, meetingId);
    assert.equal(meeting.status, 'complete');
    return { meetingId, botId: bot.id };
  }

  const linesOf = async (meetingId: string): Promise<Line[]> =>
    (await h.request('GET', `/v1/meetings/${meetingId}/transcript`)).json.segments as Line[];

  void it('R11/W5/W6: a timeline with negative offsets and a re-join names every segment as the timeline says; a download lost once is fetched again', async () => {
    const { wav, spans } = conversationWav(UTTERANCES);
    const s = (ms: number) => ms / 1000;
    // Ann was already talking when the bot started recording (a negative start); Bob's turn ends
    // before Ann, re-joined as a new participant object, speaks again with no end given.
    const timeline = [
      { participant: ANN, start: -2.5, end: s(spans[0]!.endMs) + 0.4 },
      { participant: BOB, start: s(spans[1]!.startMs) - 0.3, end: s(spans[1]!.endMs) + 0.3 },
      { participant: ANN_AGAIN, start: s(spans[2]!.startMs) - 0.3, end: null },
    ];
    // The first fetch of a participant events link is cut.
    fake.failNext('speakers_download', 'reset');
    const { meetingId } = await recordedMeeting(wav, { participants: [ANN, BOB, ANN_AGAIN], timeline });

    const lines = await waitFor('the speakers to be imported', async () => {
      const got = await linesOf(meetingId);
      return got.some((l) => l.speaker !== null) ? got : null;
    });
    assert.ok(fake.calls.speakers_download >= 3, 'the lost download was fetched again');
    const truth = (l: Line) => {
      const mid = (l.startMs + l.endMs) / 2;
      const i = spans.findIndex((sp) => mid >= sp.startMs - 500 && mid <= sp.endMs + 500);
      return i === 1 ? 'Bob Stone' : i >= 0 ? 'Ann Lee' : null;
    };
    const spoken = lines.filter((l) => /[a-z]/i.test(l.text));
    assert.ok(spoken.length >= 3, JSON.stringify(lines));
    for (const l of spoken) assert.equal(l.speaker?.name ?? null, truth(l), `${JSON.stringify(l)}`);
    assert.ok(spoken.every((l) => l.speaker?.source === 'participant'));
    // The re-join is the same speaker.
    const annIds = new Set(spoken.filter((l) => l.speaker?.name === 'Ann Lee').map((l) => l.speaker!.id));
    assert.equal(annIds.size, 1, 'one speaker for Ann, re-joined or not');
    const listed = await h.request('GET', `/v1/meetings/${meetingId}/speakers`);
    assert.deepEqual((listed.json.speakers as Array<{ name: string }>).map((x) => x.name).sort(), [
      'Ann Lee',
      'Bob Stone',
    ]);

    // W5: every export names them.
    const vtt = (await h.request('GET', `/v1/meetings/${meetingId}/transcript?format=vtt`)).text;
    assert.match(vtt, /<v Ann Lee>/);
    assert.match(vtt, /<v Bob Stone>/);
    const txt = (await h.request('GET', `/v1/meetings/${meetingId}/transcript?format=txt`)).text;
    assert.match(txt, /\] Bob Stone: /);
    const srt = (await h.request('GET', `/v1/meetings/${meetingId}/transcript?format=srt`)).text;
    assert.match(srt, /\nAnn Lee: /);
    const md = (await h.request('GET', `/v1/meetings/${meetingId}/transcript?format=md`)).text;
    assert.match(md, /^# Planning\n/);
    assert.match(md, /\*\*Bob Stone\*\* \\\[00:\d\d\\\]/);

    // W6: search narrowed to a speaker, hits naming who said it; the minutes attribute the task.
    const said = await waitFor('the search index to name the speakers', async () => {
      const r = await h.request('GET', `/v1/search?q=engineers&speaker=${encodeURIComponent('bob stone')}`);
      return r.json.results?.length > 0 ? r : null;
    });
    assert.equal(said.json.results[0].meeting.id, meetingId);
    assert.equal(said.json.results[0].hits[0].speaker, 'Bob Stone');
    const notAnn = await h.request('GET', `/v1/search?q=engineers&speaker=${encodeURIComponent('Ann Lee')}`);
    assert.ok(
      !(notAnn.json.results as Array<{ meeting: { id: string } }>).some((r) => r.meeting.id === meetingId),
    );
    const minutes = await waitFor('the minutes of the transcript with its speakers', async () => {
      const m = await h.request('GET', `/v1/meetings/${meetingId}`);
      return m.json.minutes?.content && !m.json.minutes.stale ? m.json.minutes.content : null;
    });
    const items = [...(minutes.actionItems as string[]), ...(minutes.decisions as string[])];
    assert.ok(
      items.some((i) => /^(Ann Lee|Bob Stone): /.test(i)),
      `decisions and tasks say who: ${JSON.stringify(items)}`,
    );
  });

  void it('W4/W5: a speaker renamed reads so in JSON and the DOCX read back; a new revision and meeting.transcript_revised', async () => {
    const { wav, spans } = conversationWav(UTTERANCES.slice(0, 2));
    const timeline = [
      { participant: ANN, start: 0, end: spans[0]!.endMs / 1000 + 0.4 },
      { participant: BOB, start: spans[1]!.startMs / 1000 - 0.3, end: spans[1]!.endMs / 1000 + 0.3 },
    ];
    const { meetingId } = await recordedMeeting(wav, { participants: [ANN, BOB], timeline });
    const lines = await waitFor('the speakers to be imported', async () => {
      const got = await linesOf(meetingId);
      return got.some((l) => l.speaker?.name === 'Bob Stone') ? got : null;
    });
    const bob = lines.find((l) => l.speaker?.name === 'Bob Stone')!.speaker!;
    const before = (await h.request('GET', `/v1/meetings/${meetingId}/transcript`)).json.revision as number;

    const renamed = await h.request('PATCH', `/v1/meetings/${meetingId}/speakers/${bob.id}`, {
      name: 'Robert',
    });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.json.name, 'Robert');
    assert.equal(renamed.json.label, 'Bob Stone');
    const after = await h.request('GET', `/v1/meetings/${meetingId}/transcript`);
    assert.equal(after.json.revision, before + 1);
    assert.ok((after.json.segments as Line[]).some((l) => l.speaker?.name === 'Robert'));
    assert.ok(!(after.json.segments as Line[]).some((l) => l.speaker?.name === 'Bob Stone'));
    const revised = await h.app.database.db
      .selectFrom('outbox')
      .select('payload')
      .where('subject_id', '=', meetingId)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    assert.ok(revised.length >= 1, 'meeting.transcript_revised was emitted');

    // Bad names are refused with what is wrong; nothing changes.
    const blank = await h.request('PATCH', `/v1/meetings/${meetingId}/speakers/${bob.id}`, { name: '  ' });
    assert.equal(blank.status, 400);
    assert.equal(blank.json.error.code, 'speaker.name');
    const unknown = await h.request('PATCH', `/v1/meetings/${meetingId}/speakers/${randomUUID()}`, {
      name: 'X',
    });
    assert.equal(unknown.status, 404);

    // DOCX, opened and read back.
    const res = await h.api.inject({
      method: 'GET',
      url: `/v1/meetings/${meetingId}/transcript?format=docx`,
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /wordprocessingml/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-docx-'));
    try {
      const file = path.join(dir, 'meeting.docx');
      fs.writeFileSync(file, res.rawPayload);
      const xml = execFileSync('unzip', ['-p', file, 'word/document.xml'], { encoding: 'utf8' });
      const text = xml.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
      assert.match(text, /Planning/);
      assert.match(text, /Robert/);
      assert.match(text, /Ann Lee/);
      assert.match(text, /engineers/i);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }

    // W4: merged, Robert's words read as Ann's.
    const ann = (after.json.segments as Line[]).find((l) => l.speaker?.name === 'Ann Lee')!.speaker!;
    const merged = await h.request('POST', `/v1/meetings/${meetingId}/speakers/${bob.id}/merge`, {
      into: ann.id,
    });
    assert.equal(merged.status, 200, merged.text);
    const one = (await linesOf(meetingId)).filter((l) => l.speaker !== null);
    assert.ok(one.every((l) => l.speaker!.id === ann.id && l.speaker!.name === 'Ann Lee'));
    const again = await h.request('POST', `/v1/meetings/${meetingId}/speakers/${bob.id}/merge`, {
      into: ann.id,
    });
    assert.equal(again.status, 409);
  });

  void it('R11: a recording the provider made no participant events for has no speakers, and is complete all the same', async () => {
    const { wav } = conversationWav(UTTERANCES.slice(0, 1));
    const before = fake.calls.speakers_download;
    const { meetingId } = await recordedMeeting(wav, 'pending');
    // Still being made: the import waits; the meeting's words are there, with no speaker.
    const lines = await linesOf(meetingId);
    assert.ok(lines.length > 0);
    assert.ok(lines.every((l) => l.speaker === null && l.speakerAttribution === null));
    assert.equal(fake.calls.speakers_download, before);
  });
});
