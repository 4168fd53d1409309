/**
 * The PDF worker's script, run with `eval` so the same code runs from the TypeScript sources (tsx, vitest) and
 * from dist/ without a JavaScript file beside them; pdf.js is imported from the absolute URL the main thread
 * resolved (`workerData.pdfjs`). One job at a time: `{ id, data: Uint8Array, maxChars }` →
 * `{ id, text, pages, truncated }` or `{ id, error, name }`.
 */
export const PDF_WORKER_SCRIPT = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
const pdfjs = await import(workerData.pdfjs);

function pageText(content) {
  let text = '';
  for (const item of content.items) {
    if (typeof item.str !== 'string') continue;
    text += item.str;
    if (item.hasEOL) text += '\n';
  }
  return text;
}

async function extract(data, maxChars) {
  const task = pdfjs.getDocument({
    data,
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    stopAtErrors: false,
    verbosity: 0,
  });
  try {
    const doc = await task.promise;
    const parts = [];
    let length = 0;
    let truncated = false;
    for (let n = 1; n <= doc.numPages; n++) {
      if (length >= maxChars) {
        truncated = true;
        break;
      }
      const page = await doc.getPage(n);
      const text = pageText(await page.getTextContent()).trim();
      page.cleanup();
      if (!text) continue;
      parts.push(text);
      length += text.length + 2;
    }
    let text = parts.join('\n\n');
    if (text.length > maxChars) {
      const high = text.charCodeAt(maxChars - 1);
      text = text.slice(0, high >= 0xd800 && high <= 0xdbff ? maxChars - 1 : maxChars);
      truncated = true;
    }
    return { text, pages: doc.numPages, truncated };
  } finally {
    await task.destroy().catch(() => undefined);
  }
}

parentPort.on('message', async (job) => {
  try {
    const result = await extract(job.data, job.maxChars);
    parentPort.postMessage({ id: job.id, ...result });
  } catch (error) {
    parentPort.postMessage({ id: job.id, error: String(error?.message ?? error), name: String(error?.name ?? 'Error') });
  }
});
parentPort.postMessage({ ready: true });
})();
`;
