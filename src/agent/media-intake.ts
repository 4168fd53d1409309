import type { AgentConfig, ResolvedConfig } from '../config/resolved.ts';
import type { DeadlineTimers } from '../core/deadline.ts';
import { isAbortError, MediaFetchError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { Attachment, InboundMessage, MediaDownload, MediaRecord } from '../core/message.ts';
import { documentText } from '../media/document-text.ts';
import { prepareImage } from '../media/image.ts';
import { audioLine, documentBlock, failedLine, fileLine, imageLine, tooLargeLine, voiceLine } from '../media/media-lines.ts';
import type { MediaStore, StoredMedia } from '../media/media-store.ts';
import { sniffMime } from '../media/sniff.ts';
import type { Provider } from '../providers/types.ts';

/** Opens an attachment of a message through the channel that received it; undefined when that channel cannot. */
export type MediaFetcher = (message: InboundMessage, attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }) => Promise<MediaDownload> | undefined;

/** What the intake needs: the store, how to fetch, who transcribes. */
export interface MediaIntakeDeps {
  config: ResolvedConfig;
  store: MediaStore;
  fetch: MediaFetcher;
  /** The provider that transcribes for an agent (`media.transcription.provider`, else the agent's), if it can. */
  transcriberOf(agent: AgentConfig): Provider | undefined;
  now(): number;
  timers?: DeadlineTimers;
}

/** Who a prepared item is for (the turn's agent, signal, logger). */
interface ItemScope {
  agent: AgentConfig;
  signal: AbortSignal;
  logger: Logger;
  correlationId: string;
}

/** What one attachment became: its record, what the message's text gets, a transcript. */
interface PreparedItem {
  record: MediaRecord;
  note?: string;
  transcript?: string;
}

/** The facts of one item the model is told about, whatever became of it. */
interface ItemFacts {
  kind: MediaRecord['kind'];
  name?: string;
  mime: string;
  size: number;
  durationSeconds?: number;
}

const realTimers: DeadlineTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * The media intake of a turn (SPEC §15): before the turn reads the message, each attachment is fetched from the
 * platform that sent it (within `media.maxBytes` and the download deadline) into the media store and turned into
 * what the model gets: an image (downscaled), a voice note's transcript (which becomes the message's text, so a
 * spoken command works), a document's text, or a line. Bad media never costs the message: it becomes a line.
 * The message was journaled before, so a crash mid-download replays it and the intake runs again.
 */
export class MediaIntake {
  private readonly deps: MediaIntakeDeps;

  constructor(deps: MediaIntakeDeps) {
    this.deps = deps;
  }

  /**
   * Sets `message.media` (one record per attachment, in order) and `message.mediaNotes`, and puts transcripts
   * into `message.text`. Rejects only when `signal` is aborted (a stop or shutdown: the message is replayed).
   */
  async prepare(message: InboundMessage, options: ItemScope): Promise<void> {
    if (!message.attachments.length || message.media) return;
    const records: MediaRecord[] = [];
    const notes: string[] = [];
    const transcripts: string[] = [];
    for (const attachment of message.attachments) {
      const item = await this.item(message, attachment, options);
      records.push(item.record);
      if (item.note) notes.push(item.note);
      if (item.transcript) transcripts.push(item.transcript);
    }
    if (transcripts.length) message.text = [message.text, ...transcripts].filter(Boolean).join('\n');
    message.media = records;
    message.mediaNotes = notes;
    options.logger.info({ media: records.map((r) => ({ kind: r.kind, mime: r.mime, size: r.size, as: r.as, ...(r.problem ? { problem: r.problem } : {}) })) }, 'media prepared');
  }

  private async item(message: InboundMessage, attachment: Attachment, options: ItemScope): Promise<PreparedItem> {
    const media = this.deps.config.media;
    const announced: ItemFacts = { kind: kindOf(attachment, attachment.mimeType), name: attachment.name, mime: attachment.mimeType ?? 'application/octet-stream', size: attachment.size ?? 0, ...(attachment.durationSeconds ? { durationSeconds: attachment.durationSeconds } : {}) };
    if (attachment.passThroughUrl) {
      return { record: { ...announced, kind: 'image', mime: attachment.mimeType ?? 'image/*', as: 'image', url: attachment.passThroughUrl, line: imageLine({ mime: attachment.mimeType ?? 'image', size: 0 }) } };
    }
    if (announced.size > media.maxBytes) return this.line(announced, 'too_large');
    let stored: StoredMedia;
    let bytes: Buffer;
    try {
      const fetched = await this.fetch(message, attachment, options.signal);
      if (!fetched) return this.line(announced, 'unsupported');
      ({ stored, bytes } = fetched);
    } catch (error) {
      if (options.signal.aborted) throw error;
      const reason = error instanceof MediaFetchError ? error.reason : 'download_failed';
      options.logger.warn({ err: error, attachment: { type: attachment.type, mime: attachment.mimeType, size: attachment.size } }, 'an attachment could not be fetched; the model gets a line');
      return this.line(announced, reason);
    }
    const mime = sniffMime(bytes.subarray(0, 64)) ?? attachment.mimeType ?? 'application/octet-stream';
    const facts: ItemFacts = { ...announced, kind: kindOf(attachment, mime), mime, size: stored.size };
    const base = { ...facts, sha256: stored.sha256 };
    try {
      if (facts.kind === 'image') return await this.image(base, bytes, options.signal);
      if (facts.kind === 'voice' || facts.kind === 'audio') return await this.audio(base, bytes, options);
      if (facts.kind === 'document' || facts.kind === 'file') {
        const doc = await documentText(bytes, { mime, name: facts.name, maxChars: media.maxTextChars, signal: options.signal });
        if (doc) {
          const line = fileLine({ name: facts.name, mime, size: facts.size });
          return { record: { ...base, as: 'text', line }, note: documentBlock({ name: facts.name ?? 'file', text: doc.text, truncated: doc.truncated }) };
        }
      }
    } catch (error) {
      if (options.signal.aborted) throw error;
      const reason = error instanceof MediaFetchError ? error.reason : 'undecodable';
      options.logger.warn({ err: error, mime, size: facts.size }, 'an attachment could not be read; the model gets a line');
      return this.line(facts, reason, stored.sha256);
    }
    const line = facts.kind === 'video' ? `[video: ${facts.name ? `${facts.name}, ` : ''}${mime}${facts.durationSeconds ? `, ${Math.round(facts.durationSeconds)} s` : ''}]` : fileLine({ name: facts.name, mime, size: facts.size });
    return { record: { ...base, as: 'line', line }, note: line };
  }

  /** The bytes of an attachment, in the store; undefined when no channel can fetch it. */
  private async fetch(message: InboundMessage, attachment: Attachment, signal: AbortSignal): Promise<{ stored: StoredMedia; bytes: Buffer } | undefined> {
    const { store, config } = this.deps;
    if (attachment.sha256) {
      const [stat, bytes] = await Promise.all([store.stat(attachment.sha256), store.get(attachment.sha256)]);
      if (!stat || !bytes) throw new MediaFetchError('download_failed', `The stored file ${attachment.sha256} is gone.`);
      return { stored: stat, bytes };
    }
    const timers = this.deps.timers ?? realTimers;
    const deadline = new AbortController();
    const ms = config.media.downloadTimeoutSeconds * 1000;
    const handle = timers.setTimeout(() => deadline.abort(new MediaFetchError('timeout', `The download took longer than ${config.media.downloadTimeoutSeconds} s.`)), ms);
    const both = AbortSignal.any([signal, deadline.signal]);
    try {
      const download = this.deps.fetch(message, attachment, { signal: both, maxBytes: config.media.maxBytes });
      if (!download) return undefined;
      const opened = await download;
      if (opened.size !== undefined && opened.size > config.media.maxBytes) throw new MediaFetchError('too_large', `The file is ${opened.size} bytes, over media.maxBytes.`);
      const stored = await store.put(opened.body, { mime: opened.mime ?? attachment.mimeType ?? 'application/octet-stream', maxBytes: config.media.maxBytes, signal: both, now: this.deps.now() });
      // Read back rather than kept while streaming: joining the chunks wrote megabytes of fresh memory on the event
      // loop in one go (250-370 ms stalls per 5 MB photo where first-touched pages are slow, as in VMs with free page
      // reporting); a file read fills its buffer on the thread pool.
      const bytes = await store.get(stored.sha256);
      if (!bytes) throw new MediaFetchError('download_failed', `The stored file ${stored.sha256} went before it was read.`);
      return { stored, bytes };
    } catch (error) {
      if (deadline.signal.aborted && !signal.aborted) throw deadline.signal.reason as Error;
      if (isAbortError(error) && !signal.aborted) throw new MediaFetchError('download_failed', 'The download was cut.', { cause: error });
      throw error;
    } finally {
      timers.clearTimeout(handle);
    }
  }

  private async image(base: ItemFacts & { sha256: string }, bytes: Buffer, signal: AbortSignal): Promise<{ record: MediaRecord }> {
    const prepared = await prepareImage(bytes, { maxSide: this.deps.config.media.imageMaxSide, signal });
    const stored = await this.deps.store.put(prepared.data, { mime: prepared.mime, maxBytes: Math.max(prepared.data.length, 1), signal, now: this.deps.now() });
    return {
      record: {
        ...base, kind: 'image', as: 'image', width: prepared.originalWidth, height: prepared.originalHeight,
        modelSha256: stored.sha256, modelMime: prepared.mime, modelWidth: prepared.width, modelHeight: prepared.height,
        line: imageLine({ mime: base.mime, width: prepared.originalWidth, height: prepared.originalHeight, size: base.size }),
      },
    };
  }

  private async audio(base: ItemFacts & { sha256: string }, bytes: Buffer, options: ItemScope): Promise<PreparedItem> {
    const settings = this.deps.config.media.transcription;
    const provider = settings.enabled ? this.deps.transcriberOf(options.agent) : undefined;
    const describe = (problem?: string) => (base.kind === 'voice'
      ? voiceLine({ durationSeconds: base.durationSeconds, problem })
      : audioLine({ name: base.name, durationSeconds: base.durationSeconds, problem }));
    if (!provider?.transcribe) {
      const line = describe('could not be transcribed');
      return { record: { ...base, as: 'line', line, problem: 'no_transcription' }, note: line };
    }
    try {
      const text = (await provider.transcribe({ data: bytes, name: base.name ?? `${base.kind}${extensionOf(base.mime)}`, mime: base.mime }, { model: settings.model, signal: options.signal, correlationId: options.correlationId })).trim();
      if (!text) throw new Error('the transcript is empty');
      const line = describe('transcribed');
      return { record: { ...base, as: 'transcript', line }, note: line, transcript: text };
    } catch (error) {
      if (options.signal.aborted) throw error;
      options.logger.warn({ err: error, mime: base.mime, size: base.size }, 'transcription failed; the model gets a line');
      const line = describe('could not be transcribed');
      return { record: { ...base, as: 'line', line, problem: 'no_transcription' }, note: line };
    }
  }

  private line(facts: ItemFacts, reason: MediaFetchError['reason'], sha256?: string): { record: MediaRecord; note: string } {
    const line = reason === 'too_large' ? tooLargeLine({ name: facts.name ?? facts.kind, size: facts.size }) : failedLine({ name: facts.name, mime: facts.mime, reason });
    return { record: { ...facts, ...(sha256 ? { sha256 } : {}), as: 'line', line, problem: reason }, note: line };
  }
}

/** What an attachment is, by what the platform called it and the (sniffed) content type. */
function kindOf(attachment: Attachment, mime: string | undefined): MediaRecord['kind'] {
  const major = mime?.split('/')[0];
  if (major === 'image') return 'image';
  if (attachment.type === 'voice') return 'voice';
  if (major === 'audio' || attachment.type === 'audio') return 'audio';
  if (major === 'video' || attachment.type === 'video') return 'video';
  if (mime === undefined && (attachment.type === 'photo' || attachment.type === 'image')) return 'image';
  return attachment.type === 'file' || attachment.type === 'other' ? 'file' : 'document';
}

function extensionOf(mime: string): string {
  const known: Record<string, string> = { 'audio/ogg': '.ogg', 'audio/mpeg': '.mp3', 'audio/mp4': '.m4a', 'audio/wav': '.wav', 'audio/x-wav': '.wav', 'audio/webm': '.webm', 'audio/flac': '.flac' };
  return known[mime] ?? '';
}
