import { downloadOf, downloadStopped, networkReason, tooLargeDownload } from '../../src/core/media-download.ts';
import { MediaFetchError } from '../../src/core/errors.ts';
import type { Attachment, MediaDownload } from '../../src/core/message.ts';

/** The hosts Discord serves attachments from. */
export const DISCORD_MEDIA_HOSTS: readonly string[] = ['cdn.discordapp.com', 'media.discordapp.net'];

/** Redirects followed at most, and only between Discord's own hosts. */
const MAX_REDIRECTS = 3;

/**
 * Whether a URL is one of Discord's attachment URLs: https on {@link DISCORD_MEDIA_HOSTS}, or on the host (and
 * port) of the configured `apiBase` (a self-hosted proxy, the tests' fake). Anything else is never fetched: an
 * attachment URL comes from the platform's event, but a forged or relayed one must not make the gateway fetch
 * an address of someone's choosing.
 */
export function isDiscordMediaUrl(raw: string, apiBase: string): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  if (url.username || url.password) return false;
  if (url.protocol === 'https:' && DISCORD_MEDIA_HOSTS.includes(url.hostname.toLowerCase())) return true;
  if (!apiBase) return false;
  try {
    const base = new URL(apiBase);
    return url.protocol === base.protocol && url.host === base.host;
  } catch {
    return false;
  }
}

/**
 * Opens a Discord attachment's bytes from its CDN URL (SPEC §15), streamed, with no credentials (the URL is
 * signed). Only Discord's URLs are fetched ({@link isDiscordMediaUrl}), redirects only among them; a file over
 * `maxBytes` as announced is refused before downloading (`too_large`); a non-2xx answer or a broken connection
 * is `download_failed`; an aborted `signal` `timeout`.
 */
export async function fetchDiscordMedia(apiBase: string, attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
  const { signal, maxBytes } = options;
  const tooLarge = (size: number) => tooLargeDownload('The Discord attachment', size, maxBytes);
  if (attachment.size !== undefined && attachment.size > maxBytes) throw tooLarge(attachment.size);
  // Messages normalized before attachments had `url` carried the URL as their file id.
  let url = attachment.url ?? (/^https?:\/\//i.test(attachment.fileId) ? attachment.fileId : undefined);
  if (!url) throw new MediaFetchError('download_failed', 'The Discord attachment has no URL.');
  for (let redirects = 0; ; redirects++) {
    if (!isDiscordMediaUrl(url, apiBase)) throw new MediaFetchError('download_failed', `Not a Discord attachment URL (${safeHost(url)}); not fetched.`);
    let response: Response;
    try {
      response = await fetch(url, { signal, redirect: 'manual' });
    } catch (error) {
      if (signal.aborted) throw downloadStopped('The Discord attachment');
      throw new MediaFetchError('download_failed', `The Discord attachment download failed (${networkReason(error)}).`);
    }
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location && redirects < MAX_REDIRECTS) {
      await response.body?.cancel().catch(() => undefined);
      url = new URL(location, url).toString();
      continue;
    }
    return downloadOf(response, {
      maxBytes, signal, what: 'The Discord attachment', refused: (status) => `Discord answered ${status} to the attachment download.`,
      mime: attachment.mimeType, size: attachment.size,
    });
  }
}

function safeHost(raw: string): string {
  try {
    return new URL(raw).host || 'no host';
  } catch {
    return 'not a URL';
  }
}
