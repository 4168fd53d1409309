// Media through a turn (issue 28, SPEC §15): a 5 MB JPEG per message, fetched through the channel's `fetchMedia`
// (64 KB chunks), stored, downscaled by sharp and sent to a fake vision model (`gpt-4o`, so vision is on), from
// `sessions` peers at once. Beside it, in the same run, the same sessions sending text only: the table shows the
// CPU an image adds. The event loop's worst stall is watched over each run (monitorEventLoopDelay), and that of an
// idle process beside it (what the machine alone does to a loop: on a shared 2-core machine, often as much).
import { spawn } from 'node:child_process';
import { readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import sharp from 'sharp';
import { loadConfig } from '../src/config/load.ts';
import type { Attachment, MediaDownload } from '../src/core/message.ts';
import { silentLogger } from '../src/core/logger.ts';
import { startGateway } from '../src/main.ts';
import { TestChannel } from '../test/helpers/test-channel.ts';
import { median, requestBytes } from './e2e-bench.ts';
import { prng } from './prng.ts';
import { nowMs, round } from './stats.ts';

/** Size of the generated photo: 4000×3000 (12 MP, a phone camera's). */
const WIDTH = 4000;
const HEIGHT = 3000;
/** Chunks `fetchMedia` streams, as a platform download arrives. */
const CHUNK = 64 * 1024;
/** The stall the issue allows (ms). */
export const STALL_TARGET_MS = 20;

/**
 * A seeded 4000×3000 noise JPEG at quality 95 (each channel 112 + 0–31: noise a JPEG cannot squeeze, about 5.4 MB;
 * full-range noise would make 12 MB). Made once per run; the same seed gives the same bytes.
 */
export async function noiseJpeg(seed = 28): Promise<Buffer> {
  const random = prng(seed);
  const raw = Buffer.alloc(WIDTH * HEIGHT * 3);
  for (let i = 0; i < raw.length; i += 4) {
    const r = (random() * 4294967296) >>> 0;
    raw[i] = 112 + (r & 31);
    if (i + 1 < raw.length) raw[i + 1] = 112 + ((r >>> 8) & 31);
    if (i + 2 < raw.length) raw[i + 2] = 112 + ((r >>> 16) & 31);
    if (i + 3 < raw.length) raw[i + 3] = 112 + ((r >>> 24) & 31);
  }
  return sharp(raw, { raw: { width: WIDTH, height: HEIGHT, channels: 3 } }).jpeg({ quality: 95 }).toBuffer();
}

/** Offset of the first quantization table's 64 values (after `FF DB`, the length and the Pq/Tq byte). */
function firstQuantTable(jpeg: Buffer): number {
  let at = 2;
  while (at + 4 < jpeg.length && jpeg[at] === 0xff) {
    const marker = jpeg[at + 1] as number;
    const length = jpeg.readUInt16BE(at + 2);
    if (marker === 0xdb) {
      if (((jpeg[at + 4] as number) >> 4) !== 0) throw new Error('the JPEG has a 16-bit quantization table');
      return at + 5;
    }
    at += 2 + length;
  }
  throw new Error('no quantization table in the JPEG');
}

/**
 * The first chunk of variant `index` of `jpeg`: one value of its first quantization table raised, so every message
 * carries a different image (different original, decoded pixels, downscaled copy and data URL: no cache or
 * content-addressed dedup helps) while the file keeps its size and nothing is re-encoded.
 */
function variantHead(jpeg: Buffer, table: number, index: number): Buffer {
  const head = Buffer.from(jpeg.subarray(0, CHUNK));
  const entry = table + 1 + (index % 63);
  head[entry] = Math.min(255, (head[entry] as number) + 1 + Math.floor(index / 63));
  return head;
}

/**
 * A channel whose platform serves photos `photo-<n>`: variant n of one JPEG, streamed in 64 KB chunks (the first
 * chunk is the variant's own, the rest is shared).
 */
class PhotoChannel extends TestChannel {
  private readonly jpeg: Buffer;
  private readonly heads: Buffer[];

  constructor(jpeg: Buffer, variants: number) {
    super('telegram');
    this.jpeg = jpeg;
    const table = firstQuantTable(jpeg);
    this.heads = Array.from({ length: variants }, (_, i) => variantHead(jpeg, table, i));
  }

  async fetchMedia(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
    const head = this.heads[Number(attachment.fileId.slice('photo-'.length))];
    if (!head) throw new Error(`no photo ${attachment.fileId}`);
    const jpeg = this.jpeg;
    return {
      body: (async function* chunks() {
        yield head;
        for (let i = CHUNK; i < jpeg.length; i += CHUNK) {
          options.signal.throwIfAborted();
          yield jpeg.subarray(i, i + CHUNK);
        }
      })(),
      size: jpeg.length, mime: 'image/jpeg',
    };
  }
}

/** An idle Node process watching its own event loop: prints `ready`, then its stalls (JSON) when its stdin ends. */
const IDLE_LOOP = `const h = require('node:perf_hooks').monitorEventLoopDelay({ resolution: 2 }); h.enable();
process.stdin.resume(); process.stdin.on('end', () => { h.disable(); process.stdout.write(JSON.stringify({ max: h.max, p99: h.percentile(99) }) + '\\n'); process.exit(0); });
process.stdout.write('ready\\n');`;

/**
 * Starts an idle process that measures its event loop's delays while a run goes on: what the machine alone does to
 * a loop that has nothing to do (other processes, this one's sharp threads). `stop` resolves with its stalls (ms).
 */
async function idleLoopProbe(): Promise<{ stop: () => Promise<{ maxMs: number; p99Ms: number }> }> {
  const child = spawn(process.execPath, ['-e', IDLE_LOOP], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.value !== 'ready') throw new Error('the idle loop probe did not start');
  let stopped: Promise<{ maxMs: number; p99Ms: number }> | undefined;
  return {
    stop: () => (stopped ??= (async () => {
      child.stdin.end();
      const { max, p99 } = JSON.parse(String((await lines.next()).value)) as { max: number; p99: number };
      return { maxMs: round(max / 1e6, 1), p99Ms: round(p99 / 1e6, 1) };
    })()),
  };
}

/** One run (text only, or a photo per message). */
export interface MediaBenchSide {
  messages: number;
  seconds: number;
  messagesPerSecond: number;
  /** CPU time of this process (the gateway, sharp's threads included; the fake model runs in its own) per message. */
  cpuUsPerMessage: number;
  /** The event loop's longest delay during the run (ms; monitorEventLoopDelay, resolution 2 ms). */
  stallMaxMs: number;
  stallP99Ms: number;
  /** The same for an idle process during the run (the machine's share of the stalls). */
  idleStallMaxMs: number;
  idleStallP99Ms: number;
  /** Mean bytes of a request body the fake model received. */
  requestBytes: number;
}

/** What {@link runMediaBench} measured: medians over the rounds, stalls the worst over them. */
export interface MediaBenchResult {
  sessions: number;
  messages: number;
  rounds: number;
  /** Bytes of the photo each message carries. */
  jpegBytes: number;
  /** Bytes of one downscaled copy (what a request carries, before base64). */
  modelImageBytes: number;
  /** Images a request carries on average: every request of a session carries all its images so far (1, 2, … per session). */
  imagesPerRequest: number;
  /** Files in the media store after one photo run (2 per message when every photo is distinct: original + downscaled). */
  storedFiles: number;
  text: MediaBenchSide;
  media: MediaBenchSide;
  imagesPerSecond: number;
  /** Media CPU per message − text CPU per message (medians of the rounds' differences). */
  addedCpuUsPerImage: number;
  stallTargetMs: number;
  /** Load average (1 min) at the start and the end. */
  loadAverage: [number, number];
}

async function side(options: {
  baseURL: string; dir: string; sessions: number; messages: number; jpeg?: Buffer; tag: string;
}): Promise<MediaBenchSide & { storedFiles: number; modelImageBytes: number }> {
  const { sessions, messages, jpeg } = options;
  const perSession = Math.ceil(messages / sessions);
  const channel = jpeg ? new PhotoChannel(jpeg, perSession * sessions) : new TestChannel('telegram');
  const stateDir = path.join(options.dir, 'data');
  const config = loadConfig({
    cwd: options.dir, env: {}, dotenv: false,
    overrides: {
      stateDir, logLevel: 'silent',
      providers: { default: { kind: 'openai', baseUrl: options.baseURL, apiKey: 'sk-bench', model: 'gpt-4o', maxRetries: 0 } },
      channels: { telegram: { enabled: true, botToken: 'bench-token', dmPolicy: 'open' } },
      agents: { defaults: { maxConcurrent: sessions, workspace: path.join(options.dir, 'workspace') } },
      session: { dmScope: 'per-peer', maxActiveSessions: 100_000 },
    },
  });
  const gw = await startGateway({ config, listen: false, adapters: [channel], logger: silentLogger() });
  await gw.supervisor.firstAttempts();
  await requestBytes(options.baseURL);
  // The garbage of the runs before (a stopped gateway's caches) is collected now, not during this run's watch.
  (globalThis as { gc?: () => void }).gc?.();
  const loop = monitorEventLoopDelay({ resolution: 2 });
  const probe = await idleLoopProbe();
  let sent = 0;
  try {
    const cpu = process.cpuUsage();
    const t0 = nowMs();
    loop.enable();
    await Promise.all(Array.from({ length: sessions }, async (_, s) => {
      for (let i = 0; i < perSession; i++) {
        const n = s * perSession + i;
        const attachments = jpeg ? [{ type: 'photo' as const, fileId: `photo-${n}`, mimeType: 'image/jpeg', size: jpeg.length }] : [];
        const submission = await channel.inject(`${options.tag} message ${i} from session ${s}`, { peerId: `${options.tag}-${s}`, attachments });
        const result = await submission.done;
        if (result?.outcome !== 'replied') throw new Error(`turn ${submission.status}/${result?.outcome}: ${result?.replies[0]?.text}`);
        sent++;
      }
    }));
    loop.disable();
    const seconds = (nowMs() - t0) / 1000;
    const used = process.cpuUsage(cpu);
    const idle = await probe.stop();
    const store = path.join(stateDir, 'media');
    const data = jpeg ? (await readdir(store)).filter((n) => /^[0-9a-f]{64}$/.test(n)) : [];
    let modelImageBytes = 0;
    for (const name of data) {
      const { size } = await stat(path.join(store, name));
      if (size !== jpeg?.length) { modelImageBytes = size; break; }
    }
    return {
      messages: sent, seconds: round(seconds, 2), messagesPerSecond: round(sent / seconds, 1),
      cpuUsPerMessage: Math.round((used.user + used.system) / sent),
      stallMaxMs: round(loop.max / 1e6, 1), stallP99Ms: round(loop.percentile(99) / 1e6, 1), idleStallMaxMs: idle.maxMs, idleStallP99Ms: idle.p99Ms,
      requestBytes: Math.round(await requestBytes(options.baseURL)), storedFiles: data.length, modelImageBytes,
    };
  } finally {
    loop.disable();
    await probe.stop().catch(() => undefined);
    await gw.stop();
    await rm(options.dir, { recursive: true, force: true });
  }
}

/**
 * Runs `messages` messages from `sessions` peers at once (each peer sends its next when the last is answered),
 * text only and with a 5 MB photo each, `rounds` times in alternating order after a warm-up of both.
 */
export async function runMediaBench(options: { baseURL: string; dir: string; sessions: number; messages: number; rounds: number }): Promise<MediaBenchResult> {
  const loadStart = os.loadavg()[0] as number;
  const jpeg = await noiseJpeg();
  const { sessions, messages } = options;
  await side({ baseURL: options.baseURL, dir: path.join(options.dir, 'warm-text'), sessions, messages: sessions, tag: 'warm' });
  await side({ baseURL: options.baseURL, dir: path.join(options.dir, 'warm-media'), sessions: 2, messages: 2, jpeg, tag: 'warm' });
  const texts: Awaited<ReturnType<typeof side>>[] = [];
  const medias: Awaited<ReturnType<typeof side>>[] = [];
  for (let r = 0; r < options.rounds; r++) {
    for (const kind of r % 2 ? ['media', 'text'] : ['text', 'media']) {
      const dir = path.join(options.dir, `${kind}-${r}`);
      if (kind === 'text') texts.push(await side({ baseURL: options.baseURL, dir, sessions, messages, tag: `t${r}` }));
      else medias.push(await side({ baseURL: options.baseURL, dir, sessions, messages, jpeg, tag: `m${r}` }));
    }
  }
  const summary = (runs: MediaBenchSide[]): MediaBenchSide => ({
    messages: runs[0]!.messages,
    seconds: median(runs.map((r) => r.seconds)),
    messagesPerSecond: median(runs.map((r) => r.messagesPerSecond)),
    cpuUsPerMessage: Math.round(median(runs.map((r) => r.cpuUsPerMessage))),
    stallMaxMs: Math.max(...runs.map((r) => r.stallMaxMs)),
    stallP99Ms: Math.max(...runs.map((r) => r.stallP99Ms)),
    idleStallMaxMs: Math.max(...runs.map((r) => r.idleStallMaxMs)),
    idleStallP99Ms: Math.max(...runs.map((r) => r.idleStallP99Ms)),
    requestBytes: Math.round(median(runs.map((r) => r.requestBytes))),
  });
  const media = summary(medias);
  return {
    sessions, messages, rounds: options.rounds, jpegBytes: jpeg.length, modelImageBytes: medias[0]!.modelImageBytes,
    imagesPerRequest: (Math.ceil(messages / sessions) + 1) / 2, storedFiles: medias[0]!.storedFiles,
    text: summary(texts), media, imagesPerSecond: media.messagesPerSecond,
    addedCpuUsPerImage: Math.round(median(medias.map((m, i) => m.cpuUsPerMessage - texts[i]!.cpuUsPerMessage))),
    stallTargetMs: STALL_TARGET_MS, loadAverage: [round(loadStart, 2), round(os.loadavg()[0] as number, 2)],
  };
}
