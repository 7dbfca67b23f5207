/**
 * The MIME type of a file from its first bytes (its magic number), for results a model gives without one: PNG, JPEG,
 * WebP, GIF, AVIF, HEIC, BMP, WAV, AIFF, FLAC, Ogg, MP3, AAC (ADTS), MP4 / M4A / QuickTime, WebM / Matroska, GLB.
 * `undefined` when the bytes match none of them.
 */
export function sniffMimeType(bytes: Uint8Array): string | undefined {
  const b = bytes;
  const at = (start: number, text: string): boolean => {
    if (b.length < start + text.length) return false;
    for (let i = 0; i < text.length; i++) if (b[start + i] !== text.charCodeAt(i)) return false;
    return true;
  };
  if (b.length >= 8 && b[0] === 0x89 && at(1, 'PNG\r\n\x1a\n')) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (at(0, 'RIFF') && at(8, 'WEBP')) return 'image/webp';
  if (at(0, 'GIF87a') || at(0, 'GIF89a')) return 'image/gif';
  if (at(0, 'BM') && b.length >= 26 && b[14] !== undefined && [12, 40, 52, 56, 108, 124].includes(b[14])) return 'image/bmp';
  if (at(0, 'RIFF') && at(8, 'WAVE')) return 'audio/wav';
  if (at(0, 'FORM') && (at(8, 'AIFF') || at(8, 'AIFC'))) return 'audio/aiff';
  if (at(0, 'fLaC')) return 'audio/flac';
  if (at(0, 'OggS')) return 'audio/ogg';
  if (at(0, 'ID3')) return 'audio/mpeg';
  if (b.length >= 2 && b[0] === 0xff && (b[1]! & 0xe0) === 0xe0) {
    // An MPEG audio frame header: layer bits 00 are ADTS (AAC), anything else is MP1/2/3.
    return (b[1]! & 0x06) === 0 ? 'audio/aac' : 'audio/mpeg';
  }
  if (at(4, 'ftyp')) {
    const brand = String.fromCharCode(...b.subarray(8, 12));
    if (brand === 'avif' || brand === 'avis') return 'image/avif';
    if (['heic', 'heix', 'mif1', 'msf1'].includes(brand)) return 'image/heic';
    if (brand === 'M4A ' || brand === 'M4B ') return 'audio/mp4';
    if (brand === 'qt  ') return 'video/quicktime';
    return 'video/mp4';
  }
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) {
    // EBML: the DocType in the header says WebM or Matroska.
    const head = Buffer.from(b.subarray(0, 64)).toString('latin1');
    return head.includes('webm') ? 'video/webm' : 'video/x-matroska';
  }
  if (at(0, 'glTF')) return 'model/gltf-binary';
  return undefined;
}
