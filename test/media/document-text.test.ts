import { afterAll, describe, expect, it } from 'vitest';
import { MediaFetchError } from '../../src/core/errors.ts';
import { closePdfWorkers, documentText, pdfWorkerStats } from '../../src/media/document-text.ts';
import { hugePdf, makePdf } from './pdf-fixtures.ts';
import { stallProbe } from './stall-probe.ts';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => expect.fail('expected a rejection'), (error: unknown) => error);
}

afterAll(() => closePdfWorkers());

describe('documentText: text files', () => {
  it('decodes UTF-8, drops a BOM, and cuts at maxChars (never inside a surrogate pair)', async () => {
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('naïve café ✓\nline 2', 'utf8')]);
    expect(await documentText(bom, { mime: 'text/plain', maxChars: 1000 })).toEqual({ text: 'naïve café ✓\nline 2', truncated: false });
    expect(await documentText(Buffer.from('abcdefghij'), { mime: 'text/plain', maxChars: 4 })).toEqual({ text: 'abcd', truncated: true });
    expect(await documentText(Buffer.from('abcd'), { mime: 'text/plain', maxChars: 4 })).toEqual({ text: 'abcd', truncated: false });
    const emoji = await documentText(Buffer.from('ab😀cd'), { mime: 'text/plain', maxChars: 3 });
    expect(emoji).toEqual({ text: 'ab', truncated: true });
  });

  it('decodes UTF-16 with a byte order mark', async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('hello ✓', 'utf16le')]);
    expect(await documentText(le, { mime: 'text/plain', name: 'a.txt', maxChars: 100 })).toEqual({ text: 'hello ✓', truncated: false });
  });

  it('takes source code by its name, JSON and CSV by mime type; reads Latin-1 text that is not UTF-8', async () => {
    expect((await documentText(Buffer.from('def f():\n  return 1\n'), { mime: 'application/octet-stream', name: 'f.py', maxChars: 100 }))?.text).toContain('def f()');
    expect((await documentText(Buffer.from('{"a":1}'), { mime: 'application/json', maxChars: 100 }))?.text).toBe('{"a":1}');
    expect((await documentText(Buffer.from('a,b\n1,2\n'), { mime: 'text/csv', maxChars: 100 }))?.text).toBe('a,b\n1,2\n');
    expect((await documentText(Buffer.from('caf\xe9 cr\xe8me', 'latin1'), { mime: 'text/plain', maxChars: 100 }))?.text).toBe('café crème');
  });

  it('refuses binary data named .txt, and files that are neither text nor PDF', async () => {
    const binary = Buffer.from([0x01, 0x02, 0x00, 0x00, 0x7f, 0x45, 0x4c, 0x46, 0x00, 0x10]);
    expect(await documentText(binary, { mime: 'text/plain', name: 'notes.txt', maxChars: 100 })).toBeUndefined();
    // One NUL in otherwise plain text: binary (a text file has none).
    expect(await documentText(Buffer.from(`${'plain words '.repeat(50)}\0${'more words '.repeat(50)}`), { mime: 'text/plain', name: 'a.txt', maxChars: 10_000 })).toBeUndefined();
    const controls = Buffer.from(Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? 0x01 : 0x41)));
    expect(await documentText(controls, { mime: 'text/plain', name: 'x.txt', maxChars: 100 })).toBeUndefined();
    // A PNG with a .txt name: the bytes say what it is.
    expect(await documentText(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]), { mime: 'text/plain', name: 'a.txt', maxChars: 100 })).toBeUndefined();
    expect(await documentText(Buffer.from('PK\x03\x04 zip'), { mime: 'application/zip', name: 'a.zip', maxChars: 100 })).toBeUndefined();
    expect(await documentText(Buffer.from('hello'), { mime: 'application/octet-stream', name: 'a.bin', maxChars: 100 })).toBeUndefined();
  });

  it('reads only what maxChars needs of a large text file', async () => {
    const big = Buffer.alloc(20 * 1024 * 1024, 'a');
    const started = performance.now();
    const result = await documentText(big, { mime: 'text/plain', maxChars: 50_000 });
    expect(result?.text.length).toBe(50_000);
    expect(result?.truncated).toBe(true);
    expect(performance.now() - started).toBeLessThan(100);
  });
});

describe('documentText: PDF (pdf.js in a worker thread)', () => {
  it('reads the text of every page', async () => {
    const pdf = makePdf(['Quarterly report (draft)', 'Second page\nwith two lines']);
    const result = await documentText(pdf, { mime: 'application/pdf', name: 'report.pdf', maxChars: 10_000 });
    expect(result).toEqual({ text: 'Quarterly report (draft)\n\nSecond page\nwith two lines', truncated: false, pages: 2 });
  }, 30_000);

  it('stops at maxChars and says it was cut', async () => {
    const pdf = makePdf(['A'.repeat(60), 'B'.repeat(60), 'C'.repeat(60)]);
    const result = await documentText(pdf, { mime: 'application/octet-stream', maxChars: 50, timeoutMs: 10_000 });
    expect(result).toEqual({ text: 'A'.repeat(50), truncated: true, pages: 3 });
  }, 30_000);

  it('refuses a truncated or corrupt PDF with MediaFetchError(undecodable)', async () => {
    const pdf = makePdf(['hello']);
    for (const bytes of [pdf.subarray(0, 60), Buffer.from('%PDF-1.4\ngarbage garbage garbage')]) {
      const error = await rejection(documentText(bytes, { mime: 'application/pdf', maxChars: 100, timeoutMs: 10_000 }));
      expect(error).toBeInstanceOf(MediaFetchError);
      expect((error as MediaFetchError).reason).toBe('undecodable');
    }
  }, 30_000);

  // A retry for a garbage collection of the test runner's heap; work that blocks the loop fails every try.
  it('terminates a PDF that takes too long at timeoutMs, and the event loop stays free meanwhile', { timeout: 60_000, retry: 2 }, async () => {
    await documentText(makePdf(['warm']), { mime: 'application/pdf', maxChars: 100 }); // a started worker
    const huge = hugePdf(400_000); // a 14 MB content stream
    const workers = pdfWorkerStats().workers;
    const probe = await stallProbe().settled();
    const started = performance.now();
    const error = await rejection(documentText(huge, { mime: 'application/pdf', maxChars: 1_000_000_000, timeoutMs: 300 }));
    const elapsed = performance.now() - started;
    const stall = probe.stop();
    console.log(`PDF past its deadline: rejected after ${Math.round(elapsed)} ms; worst event-loop stall ${stall.toFixed(1)} ms of the main thread's own work (${probe.wall().toFixed(1)} ms wall-clock, scheduling included)`);
    expect(error).toBeInstanceOf(MediaFetchError);
    expect((error as MediaFetchError).reason).toBe('timeout');
    expect(elapsed).toBeLessThan(3000);
    expect(stall).toBeLessThan(50);
    // The worker that was stuck on it is gone, not left reading.
    expect(pdfWorkerStats()).toEqual({ workers: workers - 1, busy: 0, queued: 0 });
    // The pool goes on after a terminated worker.
    expect((await documentText(makePdf(['after']), { mime: 'application/pdf', maxChars: 100 }))?.text).toBe('after');
  });

  it('rejects with the signal reason when aborted while a PDF is read', async () => {
    const controller = new AbortController();
    const pending = documentText(hugePdf(400_000), { mime: 'application/pdf', maxChars: 1_000_000_000, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('the turn was stopped')), 50);
    await expect(pending).rejects.toThrow('the turn was stopped');
    expect(pdfWorkerStats()).toMatchObject({ busy: 0, queued: 0 });
  }, 30_000);
});
