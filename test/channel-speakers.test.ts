import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ChannelBuffer, gateByDominance } from '../src/domain/channels.ts';
import { conversationWav, startHarness, waitForMeeting, type Harness } from './support/harness.ts';
import { multichannelWav, samplesOf, withBleed } from './support/channels.ts';

void describe('channels as speakers (B11)', () => {
  void it('B11: the dominance rule keeps each voice on its own channel and silences its bleed; crosstalk keeps both', () => {
    const rate = 16_000;
    const tone = (hz: number, amp: number, n: number) =>
      Int16Array.from({ length: n }, (_, i) => Math.round(amp * Math.sin((2 * Math.PI * hz * i) / rate)));
    const a = tone(220, 8_000, rate); // A speaks for a second
    const b = new Int16Array(rate);
    const left = withBleed(a, b, 0.1);
    const right = withBleed(b, a, 0.1);
    const [l, r] = gateByDominance([left, right], rate);
    const rms = (x: Int16Array) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);
    assert.ok(rms(l!) > 5_000, 'the speaker keeps their channel');
    assert.equal(rms(r!), 0, 'the bleed is silenced');
    // Both at once, at similar levels: both kept.
    const both = gateByDominance([tone(220, 8_000, rate), tone(330, 6_000, rate)], rate);
    assert.ok(both.every((x) => rms(x) > 3_000));
  });

  void it('B11: channels pushed as interleaved pieces of any size are cut at the same boundaries', () => {
    const buf = new ChannelBuffer(2, 3);
    const inter = Int16Array.from({ length: 20 }, (_, i) => i);
    buf.push(inter.subarray(0, 7));
    const mix = buf.push(inter.subarray(7));
    assert.equal(mix.length, 7);
    const [c0, c1] = buf.take(3, 6);
    assert.deepEqual([...c0!], [6, 8, 10]);
    assert.deepEqual([...c1!], [7, 9, 11]);
    const [d0] = buf.take(6, 10);
    assert.deepEqual([...d0!], [12, 14, 16, 18]);
  });

  let h: Harness;
  before(async () => {
    h = await startHarness();
    h.spawnWorker();
  });
  after(async () => h?.close());

  void it('B11: a stereo upload with 10 % bleed attributes each word to its channel, and the bleed is not transcribed twice', async () => {
    // Ann (left) speaks first and third, Bob (right) second; each channel hears the other at 10 %.
    const { wav, spans, sampleRate } = conversationWav([
      'The quarterly budget meeting will discuss the marketing plan.',
      'We decided to hire two engineers for the new project.',
      'Alice will send the report to the finance team by Friday.',
    ]);
    const mix = samplesOf(wav);
    const ann = mix.slice();
    const bob = new Int16Array(mix.length);
    const second = spans[1]!;
    const from = Math.round((second.startMs / 1000) * sampleRate);
    const to = Math.round((second.endMs / 1000) * sampleRate);
    bob.set(mix.subarray(from, to), from);
    ann.fill(0, from, to);
    const stereo = multichannelWav([withBleed(ann, bob, 0.1), withBleed(bob, ann, 0.1)], sampleRate);

    const created = await h.request('POST', '/v1/meetings', {
      source: 'upload',
      title: 'stereo call',
      channels: 'speakers',
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.channels, 'speakers');
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/recording`, stereo, {
      'content-type': 'audio/wav',
    });
    assert.equal(put.status, 202, put.text);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');

    const lines = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json.segments as Array<{
      startMs: number;
      endMs: number;
      text: string;
      speaker: { name: string; source: string } | null;
      speakerAttribution: string | null;
    }>;
    const truth = (l: { startMs: number; endMs: number }) => {
      const mid = (l.startMs + l.endMs) / 2;
      return mid >= second.startMs - 300 && mid <= second.endMs + 300 ? 'Channel 2' : 'Channel 1';
    };
    assert.ok(lines.length >= 3, JSON.stringify(lines));
    const words = lines.reduce((n, l) => n + l.text.split(/\s+/).length, 0);
    const right = lines
      .filter((l) => l.speaker?.name === truth(l))
      .reduce((n, l) => n + l.text.split(/\s+/).length, 0);
    assert.equal(right, words, `every word on its channel: ${JSON.stringify(lines)}`);
    assert.ok(lines.every((l) => l.speaker?.source === 'channel' && l.speakerAttribution === 'source'));
    // Transcribed once: no stretch of speech has words from both channels.
    for (const a of lines)
      for (const b of lines)
        if (a.speaker?.name !== b.speaker?.name)
          assert.ok(a.endMs <= b.startMs || b.endMs <= a.startMs, `${a.text} | ${b.text} overlap`);
    const text = lines.map((l) => l.text).join(' ');
    assert.match(text, /budget/);
    assert.match(text, /engineers/);

    // A channels value other than "speakers", or on a live meeting, is refused with what is wrong.
    const bad = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'x', channels: 'left' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'meeting.channels');
    const live = await h.request('POST', '/v1/meetings', {
      source: 'live',
      title: 'x',
      channels: 'speakers',
    });
    assert.equal(live.status, 400);
  });
});
