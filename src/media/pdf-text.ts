import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { MediaFetchError } from '../core/errors.ts';
import { PDF_WORKER_SCRIPT } from './pdf-text-worker.ts';

/** The text a PDF's pages hold, as far as it was read. */
export interface PdfText {
  text: string;
  pages: number;
  truncated: boolean;
}

/** Workers reading PDFs at once; more jobs wait for one. */
const MAX_WORKERS = 2;
/** An idle worker is kept this long (starting one loads pdf.js: about a second on a busy machine). */
const IDLE_MS = 30_000;
/** Extra time a job on a worker that is still starting gets beyond its own deadline. */
const STARTUP_ALLOWANCE_MS = 10_000;
/** Bytes copied per event-loop turn when handing a PDF to a worker (fresh memory can be slow to touch). */
const COPY_CHUNK = 256 * 1024;
/** Heap of one worker: a PDF that needs more is undecodable, not the gateway's problem. */
const WORKER_HEAP_MB = 256;

let pdfjsUrl: string | undefined;

/** pdf.js's legacy build (the one for Node), as the absolute URL the eval'd worker imports. */
function pdfjsEntry(): string {
  pdfjsUrl ??= pathToFileURL(createRequire(import.meta.url).resolve('pdfjs-dist/legacy/build/pdf.mjs')).href;
  return pdfjsUrl;
}

interface Job {
  id: number;
  data: Uint8Array;
  maxChars: number;
  timeoutMs: number;
  resolve(result: PdfText): void;
  reject(error: unknown): void;
  /** Set while a worker runs it. */
  slot?: Slot;
  timer?: NodeJS.Timeout;
  settled: boolean;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job?: Job;
  idleTimer?: NodeJS.Timeout;
}

type WorkerReply = { ready: true } | { id: number; text: string; pages: number; truncated: boolean } | { id: number; error: string; name: string };

const slots = new Set<Slot>();
const queue: Job[] = [];
let nextId = 1;

function settle(job: Job, outcome: { result: PdfText } | { error: unknown }): void {
  if (job.settled) return;
  job.settled = true;
  clearTimeout(job.timer);
  if ('result' in outcome) job.resolve(outcome.result);
  else job.reject(outcome.error);
}

function retire(slot: Slot): void {
  slots.delete(slot);
  clearTimeout(slot.idleTimer);
  void slot.worker.terminate().catch(() => undefined);
}

function startSlot(): Slot {
  const worker = new Worker(PDF_WORKER_SCRIPT, { eval: true, workerData: { pdfjs: pdfjsEntry() }, resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } });
  worker.unref();
  const slot: Slot = { worker, ready: false };
  worker.on('message', (reply: WorkerReply) => {
    if ('ready' in reply) {
      slot.ready = true;
      return;
    }
    const job = slot.job;
    if (!job || job.id !== reply.id) return;
    slot.job = undefined;
    if ('error' in reply) {
      settle(job, { error: new MediaFetchError('undecodable', `The PDF could not be read: ${reply.error}`) });
    } else {
      settle(job, { result: { text: reply.text, pages: reply.pages, truncated: reply.truncated } });
    }
    idle(slot);
  });
  const fail = (error: unknown): void => {
    if (!slots.has(slot)) return;
    retire(slot);
    const job = slot.job;
    slot.job = undefined;
    // Out of memory, a crash inside pdf.js: the file is what made it fail.
    if (job) settle(job, { error: new MediaFetchError('undecodable', `The PDF could not be read: ${(error as Error)?.message ?? String(error)}`, { cause: error }) });
    pump();
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the PDF worker exited (${code})`)));
  slots.add(slot);
  return slot;
}

function idle(slot: Slot): void {
  if (queue.length) {
    run(slot, queue.shift()!);
    return;
  }
  clearTimeout(slot.idleTimer);
  slot.idleTimer = setTimeout(() => retire(slot), IDLE_MS);
  slot.idleTimer.unref();
}

function run(slot: Slot, job: Job): void {
  clearTimeout(slot.idleTimer);
  slot.job = job;
  job.slot = slot;
  const allowance = slot.ready ? 0 : STARTUP_ALLOWANCE_MS;
  job.timer = setTimeout(() => {
    // pdf.js cannot be interrupted: the worker goes, and with it whatever it was stuck on.
    if (slot.job === job) {
      slot.job = undefined;
      retire(slot);
      pump();
    }
    settle(job, { error: new MediaFetchError('timeout', `Reading the PDF took longer than ${job.timeoutMs} ms.`) });
  }, job.timeoutMs + allowance);
  slot.worker.postMessage({ id: job.id, data: job.data, maxChars: job.maxChars }, [job.data.buffer as ArrayBuffer]);
}

function pump(): void {
  while (queue.length) {
    const free = [...slots].find((s) => !s.job);
    if (free) {
      run(free, queue.shift()!);
      continue;
    }
    if (slots.size >= MAX_WORKERS) return;
    run(startSlot(), queue.shift()!);
  }
}

/**
 * The text of a PDF's pages, read by pdf.js in a worker thread (a small pool, started on first use), page by
 * page until `maxChars` characters are read. The worker is terminated when the job passes `timeoutMs`
 * (`MediaFetchError('timeout')`) or the signal aborts (rejects with the signal's reason); a file pdf.js refuses
 * or chokes on is `MediaFetchError('undecodable')`. The main thread only copies the bytes.
 */
export async function pdfText(bytes: Uint8Array, options: { maxChars: number; timeoutMs: number; signal?: AbortSignal }): Promise<PdfText> {
  const { signal } = options;
  signal?.throwIfAborted();
  const data = await copyInSteps(bytes);
  signal?.throwIfAborted();
  return new Promise<PdfText>((resolve, reject) => {
    const job: Job = {
      id: nextId++,
      data, // a copy of its own, transferred to the worker
      maxChars: options.maxChars,
      timeoutMs: options.timeoutMs,
      resolve,
      reject,
      settled: false,
    };
    if (signal) {
      const onAbort = (): void => {
        const index = queue.indexOf(job);
        if (index >= 0) queue.splice(index, 1);
        const slot = job.slot;
        if (slot?.job === job) {
          slot.job = undefined;
          retire(slot);
          pump();
        }
        settle(job, { error: signal.reason });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const done = (): void => signal.removeEventListener('abort', onAbort);
      job.resolve = (r) => (done(), resolve(r));
      job.reject = (e) => (done(), reject(e));
    }
    queue.push(job);
    pump();
  });
}

/**
 * A copy of `bytes` in an ArrayBuffer of its own (the worker gets it transferred; the caller keeps its
 * bytes), made a slice per event-loop turn: touching many megabytes of fresh memory at once can take longer
 * than the loop may stall.
 */
async function copyInSteps(bytes: Uint8Array): Promise<Uint8Array> {
  const copy = new Uint8Array(bytes.length);
  for (let offset = 0; offset < bytes.length; offset += COPY_CHUNK) {
    if (offset) await new Promise((resolve) => setImmediate(resolve));
    copy.set(bytes.subarray(offset, offset + COPY_CHUNK), offset);
  }
  return copy;
}

/** The PDF workers running now, and how many of them read a PDF (for status pages and tests). */
export function pdfWorkerStats(): { workers: number; busy: number; queued: number } {
  return { workers: slots.size, busy: [...slots].filter((s) => s.job).length, queued: queue.length };
}

/** Terminates the PDF workers (idle ones also go by themselves; they never keep the process alive). */
export async function closePdfWorkers(): Promise<void> {
  const all = [...slots];
  for (const slot of all) {
    slots.delete(slot);
    clearTimeout(slot.idleTimer);
    if (slot.job) settle(slot.job, { error: new MediaFetchError('timeout', 'The PDF workers were closed.') });
    slot.job = undefined;
  }
  await Promise.all(all.map((slot) => slot.worker.terminate().catch(() => undefined)));
}
