//! An upload's bytes to the picture Pith stores: pure, bytes in and bytes
//! out, run on the decoding pool (`pool`).
//!
//! 1. The format comes from the content's first bytes only, never from a
//!    file name or a client's content type: JPEG, PNG, WebP and GIF are
//!    taken; anything else (SVG, HTML, TIFF, BMP...) is refused as
//!    `Unsupported`.
//! 2. The header's width and height are read before anything is decoded;
//!    more pixels than `Limits::max_pixels` is refused there, so a small
//!    file declaring 60000x60000 costs microseconds and no memory. The
//!    decoder then runs under `image::Limits` (an allocation cap and the
//!    sides) as a second guard against a header that lies.
//! 3. A GIF is kept as its first frame (an animation becomes a still).
//! 4. The EXIF orientation is applied to the pixels, then only the pixels
//!    are kept: EXIF (GPS, camera), XMP, ICC and comments are all gone,
//!    since the encoders are given nothing else.
//! 5. The long side is brought down to `max_side`, and a thumbnail made
//!    with a long side of `thumb_side`.
//! 6. The format written is the one that keeps the bytes small with the
//!    pure-Rust encoders the `image` crate has (no lossy WebP or AVIF
//!    encoder among them): JPEG at quality 82 for photographs, which are
//!    several times smaller than any lossless form of them; PNG for a
//!    picture with transparency (JPEG has none) or with few colours
//!    (screenshots, diagrams: PNG keeps text sharp and is often smaller
//!    than JPEG for flat colour).
//!
//! The original bytes are never kept.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::metadata::Orientation;
use image::{ColorType, DynamicImage, ExtendedColorType, ImageDecoder, ImageEncoder, ImageFormat, ImageReader};

/// JPEG quality: about where artefacts stop being visible in photographs
/// at screen sizes, and about a third of the bytes of quality 95.
pub const JPEG_QUALITY: u8 = 82;
/// Pictures with at most this many distinct colours are written as PNG.
const FEW_COLOURS: usize = 256;
/// The widest or tallest picture decoded at all, whatever its pixel count.
const MAX_DECODE_SIDE: u32 = 1 << 15;

/// What a picture may be.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most pixels (width x height) a picture may declare.
    pub max_pixels: u64,
    /// Longest side of the stored picture; larger ones are shrunk.
    pub max_side: u32,
    /// Longest side of the thumbnail.
    pub thumb_side: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_pixels: 40_000_000, max_side: 2048, thumb_side: 320 }
    }
}

/// The format a picture is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Jpeg,
    Png,
}

impl Kind {
    pub fn ext(self) -> &'static str {
        match self {
            Kind::Jpeg => "jpg",
            Kind::Png => "png",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Kind::Jpeg => "image/jpeg",
            Kind::Png => "image/png",
        }
    }

    pub fn from_ext(ext: &str) -> Option<Kind> {
        match ext {
            "jpg" => Some(Kind::Jpeg),
            "png" => Some(Kind::Png),
            _ => None,
        }
    }
}

/// Why an upload is not a picture Pith takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not JPEG, PNG, WebP or GIF by its content.
    #[error("not a picture Pith takes: send JPEG, PNG, WebP or GIF ({0})")]
    Unsupported(String),
    /// More pixels than allowed, by its header (or its decoder's limits).
    #[error("the picture is {width}x{height} pixels, more than the {max} pixels allowed")]
    TooManyPixels { width: u32, height: u32, max: u64 },
    /// Truncated or corrupt.
    #[error("the picture cannot be decoded: {0}")]
    Undecodable(String),
}

/// One encoded picture.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// What an upload became.
#[derive(Debug, Clone)]
pub struct Processed {
    pub kind: Kind,
    pub full: Encoded,
    pub thumb: Encoded,
    /// The format it came in (`jpeg`, `png`, `webp`, `gif`), for metrics.
    pub source: &'static str,
}

/// The format of `input` by its content, when Pith takes it.
pub fn sniff(input: &[u8]) -> Result<ImageFormat, Refusal> {
    match image::guess_format(input) {
        Ok(f @ (ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::WebP | ImageFormat::Gif)) => Ok(f),
        Ok(other) => Err(Refusal::Unsupported(format!("{} is not taken", other.extensions_str()[0]))),
        Err(_) => Err(Refusal::Unsupported("the content is not a known picture format".into())),
    }
}

/// The width and height `input` declares, read from its header alone.
pub fn dimensions(input: &[u8]) -> Result<(u32, u32), Refusal> {
    let format = sniff(input)?;
    let mut reader = ImageReader::with_format(Cursor::new(input), format);
    reader.limits(no_limits());
    reader.into_dimensions().map_err(undecodable)
}

/// Decodes, checks, orients, shrinks and re-encodes `input` (module doc).
pub fn process(input: &[u8], limits: &Limits) -> Result<Processed, Refusal> {
    let format = sniff(input)?;
    if format == ImageFormat::Jpeg && !jpeg_complete(input) {
        return Err(Refusal::Undecodable("the JPEG is truncated (no end marker after its last scan)".into()));
    }
    let (width, height) = dimensions(input)?;
    let pixels = u64::from(width) * u64::from(height);
    if pixels > limits.max_pixels || width > MAX_DECODE_SIDE || height > MAX_DECODE_SIDE {
        return Err(Refusal::TooManyPixels { width, height, max: limits.max_pixels });
    }
    let mut reader = ImageReader::with_format(Cursor::new(input), format);
    reader.limits(decode_limits(limits));
    let mut decoder = reader.into_decoder().map_err(|e| refusal(e, width, height, limits))?;
    // A bad EXIF block is no reason to refuse the pixels.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let img = if format == ImageFormat::Jpeg && plain_colours(decoder.color_type()) {
        // The `image` decoder holds a copy of the file: gone before decoding.
        drop(decoder);
        match scaled_jpeg(input, limits)? {
            Some(img) => img,
            None => full_size(input, format, width, height, limits)?,
        }
    } else {
        DynamicImage::from_decoder(decoder).map_err(|e| refusal(e, width, height, limits))?
    };
    let lossless_source = matches!(format, ImageFormat::Png | ImageFormat::Gif);
    // Shrunk before it is turned: the bounds are square, so the result is
    // the same, and the turn copies the small picture, not the large one.
    let mut img = fit(to_8_bit(img), limits.max_side);
    img.apply_orientation(orientation);
    let kind = choose(&img, lossless_source);
    // From a reference: a copy of the full picture only to shrink it
    // would be the largest allocation of the whole upload.
    let thumb = if img.width() <= limits.thumb_side && img.height() <= limits.thumb_side {
        img.clone()
    } else {
        img.thumbnail(limits.thumb_side, limits.thumb_side)
    };
    Ok(Processed { kind, full: encode(&img, kind)?, thumb: encode(&thumb, kind)?, source: format.extensions_str()[0] })
}

/// `input` decoded at full size by the `image` crate, under the decoder's caps.
fn full_size(
    input: &[u8],
    format: ImageFormat,
    width: u32,
    height: u32,
    limits: &Limits,
) -> Result<DynamicImage, Refusal> {
    let mut reader = ImageReader::with_format(Cursor::new(input), format);
    reader.limits(decode_limits(limits));
    let decoder = reader.into_decoder().map_err(|e| refusal(e, width, height, limits))?;
    DynamicImage::from_decoder(decoder).map_err(|e| refusal(e, width, height, limits))
}

/// The long side a JPEG is decoded to at least, as a fraction of
/// `max_side`: 15/16 lets a 4000 x 3000 photo decode at half its size
/// (2000 x 1500, stored as it comes) instead of at full size only to be
/// shrunk by 2.4 %.
fn least_decoded_side(max_side: u32) -> u16 {
    u16::try_from(max_side - max_side / 16).unwrap_or(u16::MAX).max(1)
}

/// A JPEG of 8-bit grey or colour decoded by `jpeg-decoder`, scaled in its
/// inverse DCT by 1/2, 1/4 or 1/8 when the picture would be shrunk anyway:
/// only the smaller picture is ever in memory (9 MB rather than 36 MB for
/// a 12 MP photo), and the shrinking after it has a quarter of the pixels
/// to read. `None` for what it does not give as 8-bit grey or RGB (CMYK,
/// 12-bit): the `image` decoder takes those at full size.
fn scaled_jpeg(input: &[u8], limits: &Limits) -> Result<Option<DynamicImage>, Refusal> {
    let undecodable = |e: jpeg_decoder::Error| Refusal::Undecodable(e.to_string());
    let mut decoder = jpeg_decoder::Decoder::new(Cursor::new(input));
    decoder.set_max_decoding_buffer_size(usize::try_from(limits.max_pixels.saturating_mul(4)).unwrap_or(usize::MAX));
    decoder.read_info().map_err(undecodable)?;
    let Some(info) = decoder.info() else { return Ok(None) };
    if !matches!(info.pixel_format, jpeg_decoder::PixelFormat::RGB24 | jpeg_decoder::PixelFormat::L8) {
        return Ok(None);
    }
    let side = least_decoded_side(limits.max_side);
    let (w, h) = decoder.scale(side, side).map_err(undecodable)?;
    let pixels = decoder.decode().map_err(undecodable)?;
    let (w, h) = (u32::from(w), u32::from(h));
    let img = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => image::GrayImage::from_raw(w, h, pixels).map(DynamicImage::ImageLuma8),
        _ => image::RgbImage::from_raw(w, h, pixels).map(DynamicImage::ImageRgb8),
    };
    img.map(Some).ok_or_else(|| Refusal::Undecodable("the JPEG decoder gave fewer pixels than its size".into()))
}

/// Whether the `image` decoder's reading of a JPEG's header is 8-bit grey
/// or colour, which `jpeg-decoder` gives as such. Asked first because
/// `jpeg_decoder::Decoder::info` panics on a frame of 2 or of more than 4
/// components, which the `image` decoder reads as something else or
/// refuses.
fn plain_colours(colour: ColorType) -> bool {
    matches!(colour, ColorType::Rgb8 | ColorType::L8)
}

/// MiB that decoding `input` takes, by its header: for a JPEG of 8-bit
/// grey or colour, its picture at the size `scaled_jpeg` decodes it to at
/// 3 bytes a pixel, twice over (the picture and the decoder's planes), or
/// its whole coefficients at 6 bytes a pixel when progressive (every scan
/// adds to them); for anything else 4 bytes a pixel at full size (the
/// decoded picture and the decoder's own buffers). Plus 1. What will be
/// refused (no header, too many pixels) needs next to nothing.
pub fn decode_mb(input: &[u8], limits: &Limits) -> u32 {
    let mb = |bytes: u64| u32::try_from(bytes >> 20).unwrap_or(u32::MAX).saturating_add(1);
    let (width, height) = match dimensions(input) {
        Ok((w, h)) if u64::from(w) * u64::from(h) <= limits.max_pixels => (w, h),
        _ => return 1,
    };
    let full = u64::from(width) * u64::from(height);
    let plain_jpeg = sniff(input) == Ok(ImageFormat::Jpeg)
        && ImageReader::with_format(Cursor::new(input), ImageFormat::Jpeg)
            .into_decoder()
            .is_ok_and(|d| plain_colours(d.color_type()));
    if plain_jpeg {
        let mut decoder = jpeg_decoder::Decoder::new(Cursor::new(input));
        let side = least_decoded_side(limits.max_side);
        if let (Ok((w, h)), Some(info)) = (decoder.scale(side, side), decoder.info()) {
            let scaled = u64::from(w) * u64::from(h);
            let coefficients =
                if info.coding_process == jpeg_decoder::CodingProcess::DctProgressive { full * 6 } else { 0 };
            return mb(scaled * 6 + coefficients);
        }
    }
    mb(full * 4)
}

/// Whether a JPEG's last scan is followed by its end marker. The JPEG
/// decoder fills a truncated picture's missing rows with grey rather than
/// fail, so a cut-off upload is caught here. Scan data stuffs every 0xFF
/// with a 0x00, so after the last start-of-scan (0xFFDA) an 0xFFD9 can
/// only be the end; looking after the last scan skips the end marker of
/// a thumbnail embedded in the EXIF block.
fn jpeg_complete(input: &[u8]) -> bool {
    let last_scan = input.windows(2).rposition(|w| w == [0xFF, 0xDA]);
    last_scan.is_some_and(|at| input[at..].windows(2).any(|w| w == [0xFF, 0xD9]))
}

/// The header check alone: a reader with no caps, for `dimensions`.
fn no_limits() -> image::Limits {
    image::Limits::no_limits()
}

/// The decoder's caps: the sides, and an allocation of 4 bytes a pixel of
/// the most pixels allowed (plus a little for the decoder's own tables).
fn decode_limits(limits: &Limits) -> image::Limits {
    let mut l = image::Limits::default();
    l.max_image_width = Some(MAX_DECODE_SIDE);
    l.max_image_height = Some(MAX_DECODE_SIDE);
    l.max_alloc = Some(limits.max_pixels.saturating_mul(4).saturating_add(16 << 20));
    l
}

fn undecodable(e: image::ImageError) -> Refusal {
    match e {
        image::ImageError::Unsupported(u) => Refusal::Unsupported(u.to_string()),
        other => Refusal::Undecodable(other.to_string()),
    }
}

/// A decoding error as a refusal: over the decoder's caps is too many
/// pixels (a header that lied, or 16-bit samples).
fn refusal(e: image::ImageError, width: u32, height: u32, limits: &Limits) -> Refusal {
    match e {
        image::ImageError::Limits(_) => Refusal::TooManyPixels { width, height, max: limits.max_pixels },
        other => undecodable(other),
    }
}

/// 16-bit and float samples down to 8 bits: the encoders below take 8.
fn to_8_bit(img: DynamicImage) -> DynamicImage {
    match img {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_) => img,
        DynamicImage::ImageLuma16(_) => DynamicImage::ImageLuma8(img.to_luma8()),
        other if other.color().has_alpha() => DynamicImage::ImageRgba8(other.to_rgba8()),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    }
}

/// `img` with its long side at most `side`, its aspect kept.
fn fit(img: DynamicImage, side: u32) -> DynamicImage {
    if img.width() <= side && img.height() <= side {
        return img;
    }
    // Area averaging (`thumbnail`): each source pixel adds to the output
    // pixel it falls in, in integers, so no intermediate buffer is made;
    // `resize`'s filters keep a float copy of the picture's full width at
    // the new height (~100 MB for a 12 MP photo). Averaging is a sound
    // filter for shrinking, which is all this does.
    img.thumbnail(side, side)
}

/// JPEG or PNG for `img` (module doc, step 6).
fn choose(img: &DynamicImage, lossless_source: bool) -> Kind {
    if has_transparency(img) || (lossless_source && few_colours(img)) { Kind::Png } else { Kind::Jpeg }
}

/// Any pixel not fully opaque.
fn has_transparency(img: &DynamicImage) -> bool {
    match img {
        DynamicImage::ImageLumaA8(buf) => buf.pixels().any(|p| p.0[1] != 255),
        DynamicImage::ImageRgba8(buf) => buf.pixels().any(|p| p.0[3] != 255),
        _ => false,
    }
}

/// At most `FEW_COLOURS` distinct colours; stops counting past them.
fn few_colours(img: &DynamicImage) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(FEW_COLOURS + 1);
    let rgba = img.to_rgba8();
    for p in rgba.pixels() {
        if seen.insert(p.0) && seen.len() > FEW_COLOURS {
            return false;
        }
    }
    true
}

fn encode(img: &DynamicImage, kind: Kind) -> Result<Encoded, Refusal> {
    let (width, height) = (img.width(), img.height());
    let mut bytes = Vec::new();
    let written = match kind {
        Kind::Jpeg => {
            let encoder = JpegEncoder::new_with_quality(&mut bytes, JPEG_QUALITY);
            match img {
                DynamicImage::ImageLuma8(buf) => encoder.write_image(buf, width, height, ExtendedColorType::L8),
                // Written as it is, not through a converted copy.
                DynamicImage::ImageRgb8(buf) => encoder.write_image(buf, width, height, ExtendedColorType::Rgb8),
                other => encoder.write_image(&other.to_rgb8(), width, height, ExtendedColorType::Rgb8),
            }
        }
        Kind::Png => {
            // Fast deflate: within a few per cent of the default's size on
            // screenshots, at a fraction of its time.
            let encoder = PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, PngFilter::Adaptive);
            match img {
                DynamicImage::ImageLuma8(buf) => encoder.write_image(buf, width, height, ExtendedColorType::L8),
                DynamicImage::ImageRgb8(buf) => encoder.write_image(buf, width, height, ExtendedColorType::Rgb8),
                other => encoder.write_image(&other.to_rgba8(), width, height, ExtendedColorType::Rgba8),
            }
        }
    };
    written.map_err(|e| Refusal::Undecodable(format!("re-encoding failed: {e}")))?;
    Ok(Encoded { bytes, width, height })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, RgbImage, Rgba, RgbaImage};

    fn photo(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| Rgb([(x * 7 % 256) as u8, (y * 13 % 256) as u8, ((x ^ y) % 256) as u8]))
    }

    fn encoded(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).expect("encode");
        out.into_inner()
    }

    #[test]
    fn a_large_photo_is_shrunk_to_the_long_side_as_jpeg_with_a_thumbnail() {
        let input = encoded(&DynamicImage::ImageRgb8(photo(3000, 1500)), ImageFormat::Jpeg);
        let out = process(&input, &Limits::default()).expect("processed");
        assert_eq!(out.kind, Kind::Jpeg);
        assert_eq!((out.full.width, out.full.height), (2048, 1024));
        assert_eq!((out.thumb.width, out.thumb.height), (320, 160));
        assert_eq!(sniff(&out.full.bytes), Ok(ImageFormat::Jpeg));
    }

    #[test]
    fn transparency_and_few_colours_stay_png_and_opaque_png_photos_become_jpeg() {
        let alpha = RgbaImage::from_fn(40, 30, |x, _| Rgba([200, 10, 10, if x < 20 { 0 } else { 255 }]));
        let input = encoded(&DynamicImage::ImageRgba8(alpha), ImageFormat::Png);
        assert_eq!(process(&input, &Limits::default()).expect("alpha").kind, Kind::Png);
        let flat = RgbImage::from_fn(40, 30, |x, _| if x < 20 { Rgb([255, 255, 255]) } else { Rgb([0, 0, 0]) });
        let input = encoded(&DynamicImage::ImageRgb8(flat), ImageFormat::Png);
        assert_eq!(process(&input, &Limits::default()).expect("flat").kind, Kind::Png);
        let input = encoded(&DynamicImage::ImageRgb8(photo(64, 64)), ImageFormat::Png);
        assert_eq!(process(&input, &Limits::default()).expect("photo").kind, Kind::Jpeg);
    }

    #[test]
    fn the_pixel_limit_is_checked_from_the_header_before_decoding() {
        let input = encoded(&DynamicImage::ImageRgb8(photo(100, 100)), ImageFormat::Png);
        let limits = Limits { max_pixels: 9_999, ..Limits::default() };
        assert_eq!(
            process(&input, &limits).expect_err("too many"),
            Refusal::TooManyPixels { width: 100, height: 100, max: 9_999 }
        );
    }

    #[test]
    fn html_svg_and_truncated_pictures_are_refused_by_content() {
        let html = b"<!doctype html><html><script>alert(1)</script></html>";
        assert!(matches!(process(html, &Limits::default()), Err(Refusal::Unsupported(_))));
        let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>";
        assert!(matches!(process(svg, &Limits::default()), Err(Refusal::Unsupported(_))));
        let jpeg = encoded(&DynamicImage::ImageRgb8(photo(200, 200)), ImageFormat::Jpeg);
        let cut = &jpeg[..jpeg.len() / 3];
        assert!(matches!(process(cut, &Limits::default()), Err(Refusal::Undecodable(_))));
        assert!(matches!(process(&[], &Limits::default()), Err(Refusal::Unsupported(_))));
    }

    #[test]
    fn a_gif_keeps_its_first_frame() {
        let input =
            encoded(&DynamicImage::ImageRgba8(RgbaImage::from_pixel(8, 4, Rgba([1, 2, 3, 255]))), ImageFormat::Gif);
        let out = process(&input, &Limits::default()).expect("gif");
        assert_eq!((out.full.width, out.full.height, out.kind, out.source), (8, 4, Kind::Png, "gif"));
    }
}
