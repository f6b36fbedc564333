/**
 * F5: the simulation's noisy tenant. A second workspace uploads long recordings at the start of
 * the run, so the sim workspace's windows are always claimed beside a backlog of another
 * tenant's. Its meetings are not checked for their words (the tenant under test is the sim
 * workspace); the oracle's V13 bounds how long the sim workspace's windows waited behind it.
 */
import type { SimClient } from './clients.ts';
import { toneSamples, wavOf } from './marks.ts';

export interface NoisyTenant {
  /** The noisy workspace's meetings whose recording was accepted. */
  meetings: string[];
  done: Promise<void>;
}

/** Uploads `count` recordings of `seconds` of tone each, one after another, as a patient client. */
export function startNoisyTenant(client: SimClient, count: number, seconds: number): NoisyTenant {
  const meetings: string[] = [];
  const wav = wavOf(toneSamples([{ mark: 0, samples: 16_000 * seconds }]));
  const done = (async () => {
    for (let i = 0; i < count; i++) {
      const created = await client.send(
        'POST',
        '/v1/meetings',
        { source: 'upload', title: `noisy ${i}` },
        undefined,
        { key: `noisy-${i}`, kind: 'create' },
      );
      const id = created?.json?.id;
      if (!created || created.status >= 300 || typeof id !== 'string') continue;
      const put = await client.send('PUT', `/v1/meetings/${id}/recording`, wav, 'audio/wav', {
        kind: 'upload',
        meetingId: id,
      });
      if (put && put.status === 202) meetings.push(id);
    }
  })();
  return { meetings, done };
}
