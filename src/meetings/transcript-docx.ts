import { Document, HeadingLevel, Packer, Paragraph, TextRun } from 'docx';
import { clock, paragraphs, type RenderedSegment } from '../domain/transcript-format.ts';
import type { Minutes } from '../ports.ts';

/**
 * W5: a meeting as a Word document (the maintained `docx` library): its title, the minutes where
 * there are any (decisions and action items as lists), and the transcript in paragraphs, one per
 * turn of a speaker, each with its speaker's name in bold and its time.
 */
export async function meetingDocx(input: {
  title: string;
  segments: RenderedSegment[];
  minutes: Minutes | null;
}): Promise<Buffer> {
  const body: Paragraph[] = [new Paragraph({ text: input.title, heading: HeadingLevel.TITLE })];
  const m = input.minutes;
  if (m) {
    body.push(new Paragraph({ text: 'Minutes', heading: HeadingLevel.HEADING_1 }));
    if (m.note) body.push(new Paragraph({ children: [new TextRun({ text: m.note, italics: true })] }));
    if (m.summary) body.push(new Paragraph({ text: m.summary }));
    const list = (heading: string, items: string[]) => {
      if (items.length === 0) return;
      body.push(new Paragraph({ text: heading, heading: HeadingLevel.HEADING_2 }));
      for (const item of items) body.push(new Paragraph({ text: item, bullet: { level: 0 } }));
    };
    list('Decisions', m.decisions);
    list('Action items', m.actionItems);
  }
  body.push(new Paragraph({ text: 'Transcript', heading: HeadingLevel.HEADING_1 }));
  const cues = input.segments
    .map((s) => ({
      startMs: s.startMs,
      text: s.text.replace(/\s+/g, ' ').trim(),
      speaker: s.speaker?.name ?? null,
    }))
    .filter((c) => c.text !== '');
  for (const p of paragraphs(cues)) {
    const runs: TextRun[] = [];
    if (p.speaker) runs.push(new TextRun({ text: p.speaker, bold: true }), new TextRun({ text: ' ' }));
    runs.push(
      new TextRun({ text: `[${clock(p.startMs)}]`, color: '666666' }),
      new TextRun({ text: ` ${p.text}` }),
    );
    body.push(new Paragraph({ children: runs }));
  }
  return Packer.toBuffer(
    new Document({ creator: 'Verbatim', title: input.title, sections: [{ children: body }] }),
  );
}
