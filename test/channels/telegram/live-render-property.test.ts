import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { telegramLiveCalls } from '../../../channels/telegram/live.ts';
import { TELEGRAM_TEXT_LIMIT } from '../../../channels/telegram/split-html.ts';
import { parseTelegramHtml } from '../../fakes/fake-telegram.ts';
import { fcParameters, markdownCase, PROPERTY_TIMEOUT_MS } from '../markdown-arbitrary.ts';

/** The renderer of live replies needs no Bot API. */
const live = telegramLiveCalls(() => { throw new Error('no API in a pure test'); });

describe('Telegram live replies, property-based (fast-check): every streamed prefix renders to valid HTML', () => {
  it('every part of every prefix parses strictly, has visible text and fits in a message', () => {
    const cases = markdownCase({ emphasis: ['**', '*', '_', '~~'], bareUrlIsText: true, emptyLinkShowsUrl: true });
    // Where the stream stands when an edit goes out: anywhere, mid-word and mid-markup included (whole code points, as deltas are).
    const cuts = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 8 });
    fc.assert(fc.property(cases, cuts, ({ markdown }, at) => {
      const points = Array.from(markdown);
      for (const fraction of [...at, 1]) {
        const prefix = points.slice(0, Math.floor(points.length * fraction)).join('');
        for (const part of live.render({ text: prefix })) {
          const parsed = parseTelegramHtml(part);
          if ('error' in parsed) throw new Error(`${parsed.error}\nprefix: ${JSON.stringify(prefix.slice(-200))}\npart: ${part.slice(0, 500)}`);
          expect(parsed.text.length).toBeLessThanOrEqual(TELEGRAM_TEXT_LIMIT);
          expect(parsed.text.trim()).not.toBe('');
        }
      }
    }), fcParameters(150));
  }, PROPERTY_TIMEOUT_MS);
});
