import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, transcriptionConcurrency } from '../src/config.ts';

void describe('transcription concurrency follows the machine (issue 15 scope 4)', () => {
  void it('L2: by default the local recogniser runs one window per CPU; a Whisper server gets 1 until the operator says more', () => {
    assert.equal(loadConfig({}).concurrency.transcription, os.availableParallelism());
    assert.equal(transcriptionConcurrency('auto', 'pocketsphinx', 8), 8);
    assert.equal(transcriptionConcurrency('auto', 'pocketsphinx', 0), 1, 'never below one');
    const whisper = loadConfig({ VERBATIM_ASR: 'whisper', VERBATIM_WHISPER_URL: 'http://127.0.0.1:9/v1' });
    assert.equal(whisper.concurrency.transcription, 1);
  });

  void it('L2: an explicit number wins; anything else is refused naming the setting', () => {
    assert.equal(loadConfig({ VERBATIM_TRANSCRIPTION_CONCURRENCY: '3' }).concurrency.transcription, 3);
    for (const bad of ['0', '1.5', 'many', '-2']) {
      assert.throws(
        () => loadConfig({ VERBATIM_TRANSCRIPTION_CONCURRENCY: bad }),
        (err: unknown) =>
          err instanceof ConfigError && err.message.includes('VERBATIM_TRANSCRIPTION_CONCURRENCY'),
        bad,
      );
    }
  });
});
