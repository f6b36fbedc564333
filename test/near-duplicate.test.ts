import assert from 'node:assert/strict';
import { it } from 'node:test';
import { extractiveMinutes } from '../src/adapters/extractive-minutes-writer.ts';
import { isNearDuplicate, withoutNearDuplicates, wordsOf } from '../src/domain/near-duplicate.ts';
import { withoutRepeatedMinutes } from '../src/domain/search.ts';

// A 10-minute meeting whose speakers say the same things again and again, as recognised speech
// does: the same sentence, and the same sentence with a word or two changed.
const REPEATING = Array.from({ length: 120 }, (_, i) => {
  const lines = [
    'the marketing budget for the spring campaign will be discussed on friday with the finance team',
    'so the marketing budget for the spring campaign will be discussed on friday with the finance team',
    'we agreed to move the vendor contract renewal to march',
    'we agreed to move the vendor contract renewal to march then',
    'anna will send the revised budget to the finance team by thursday',
    'the engineers need more time for the migration of the billing service',
    'lunch was good today',
  ];
  return { startMs: i * 5000, endMs: i * 5000 + 4000, text: lines[i % lines.length]! };
});

function assertNoRepeats(list: string[], what: string): void {
  for (let i = 0; i < list.length; i++) {
    for (let j = 0; j < i; j++) {
      assert.ok(
        !isNearDuplicate(wordsOf(list[i]!), wordsOf(list[j]!)),
        `${what} repeats itself: "${list[j]}" / "${list[i]}"`,
      );
    }
  }
}

void it('O3/issue 18: offline minutes of a meeting whose speakers repeat themselves never repeat a sentence or a near duplicate', () => {
  const minutes = extractiveMinutes(REPEATING);
  const summary = minutes.summary.split(/(?<=[.!?])\s+/);
  assert.equal(summary.length, 3, 'still three summary sentences');
  assertNoRepeats(summary, 'the summary');
  assertNoRepeats(minutes.decisions, 'the decisions');
  assertNoRepeats(minutes.actionItems, 'the action items');
  assert.ok(minutes.decisions.some((d) => /vendor contract/i.test(d)));
  assert.ok(minutes.actionItems.some((d) => /anna will send/i.test(d)));
});

void it('O3: near duplicates are the same words give or take a few, not sentences that share a topic', () => {
  const near = (a: string, b: string) => isNearDuplicate(wordsOf(a), wordsOf(b));
  assert.ok(near('We agreed to move the launch.', 'we agreed to move the launch'));
  assert.ok(near('we agreed to move the launch to march', 'so we agreed to move the launch to march then'));
  assert.ok(!near('the budget for spring is approved', 'the budget for autumn is still open'));
  assert.ok(!near('yes', 'yes we will ship on monday'), 'one word is too few to call a sentence repeated');
  assert.deepEqual(
    withoutNearDuplicates(['a b c d', 'a b c d e', 'x y z w'], (s) => s),
    ['a b c d', 'x y z w'],
  );
});

void it('O4/item 6: a minutes line that repeats a hit is not shown again; segment hits always are', () => {
  const hit = (kind: 'segment' | 'minutes', text: string, startMs: number | null = null) => ({
    kind,
    startMs,
    endMs: startMs === null ? null : startMs + 1000,
    text,
    highlights: [],
  });
  const hits = [
    hit('minutes', 'The quarterly budget meeting will discuss the marketing plan.'),
    hit('segment', 'the quarterly budget meeting will discuss the marketing plan', 0),
    hit('minutes', 'Decided: the quarterly budget meeting will discuss the marketing plan'),
    hit('segment', 'the quarterly budget meeting will discuss the marketing plan', 60_000),
    hit('minutes', 'Alice sends the budget report to finance by Friday.'),
    hit('minutes', 'alice sends the budget report to finance by friday'),
  ];
  assert.deepEqual(
    withoutRepeatedMinutes(hits).map((h) => [h.kind, h.startMs, h.text]),
    [
      ['segment', 0, 'the quarterly budget meeting will discuss the marketing plan'],
      ['segment', 60_000, 'the quarterly budget meeting will discuss the marketing plan'],
      ['minutes', null, 'Alice sends the budget report to finance by Friday.'],
    ],
  );
});
