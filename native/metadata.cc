#include "metadata.h"

#include <cstring>

namespace bgone {
namespace {

constexpr uint16_t kOrientation = 0x0112, kXResolution = 0x011A, kYResolution = 0x011B, kResolutionUnit = 0x0128;
constexpr uint16_t kCopyright = 0x8298, kExifIfd = 0x8769, kUserComment = 0x9286;
constexpr uint16_t kAscii = 2, kShort = 3, kLong = 4, kRational = 5, kUndefined = 7, kIfd = 13;
// The longest value kept: it must fit in one JPEG APP1 segment beside the rest of the block.
constexpr size_t kMaxValue = 60000;
constexpr size_t kMaxEntries = 1000;

// A TIFF block being read; every access is checked against its length.
struct Tiff {
  const uint8_t* data;
  size_t length;
  bool little;
  bool u16(size_t at, uint16_t& v) const {
    if (at > length || length - at < 2) return false;
    v = little ? static_cast<uint16_t>(data[at] | data[at + 1] << 8) : static_cast<uint16_t>(data[at] << 8 | data[at + 1]);
    return true;
  }
  bool u32(size_t at, uint32_t& v) const {
    if (at > length || length - at < 4) return false;
    const uint8_t* p = data + at;
    v = little ? (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24)
               : (uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]});
    return true;
  }
};

struct Entry {
  uint16_t type = 0;
  uint32_t count = 0;
  size_t value_at = 0;  // where the value's bytes are, for byte-sized types
  uint32_t word = 0;    // the value field as a number (an IFD pointer)
};

// Finds `tag` in the IFD at `offset`. Returns false when the IFD is broken (outside the block);
// `found` tells whether the tag is there with a value inside the block.
bool find_tag(const Tiff& t, size_t offset, uint16_t tag, bool& found, Entry& entry) {
  found = false;
  uint16_t count = 0;
  if (!t.u16(offset, count) || count > kMaxEntries) return false;
  if (t.length - offset - 2 < static_cast<size_t>(count) * 12) return false;
  for (uint16_t i = 0; i < count; ++i) {
    const size_t at = offset + 2 + static_cast<size_t>(i) * 12;
    uint16_t id = 0, type = 0;
    uint32_t n = 0, word = 0;
    if (!t.u16(at, id) || !t.u16(at + 2, type) || !t.u32(at + 4, n) || !t.u32(at + 8, word)) return false;
    if (id != tag) continue;
    entry.type = type;
    entry.count = n;
    entry.word = word;
    if (type == kAscii || type == kUndefined) {
      if (n <= 4) {
        entry.value_at = at + 8;
      } else {
        if (word > t.length || t.length - word < n) return false;  // points outside: broken
        entry.value_at = word;
      }
    }
    found = true;
    return true;
  }
  return true;
}

void put16(std::vector<uint8_t>& out, size_t at, uint16_t v) {
  out[at] = static_cast<uint8_t>(v);
  out[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put32(std::vector<uint8_t>& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Text made safe for XML: valid UTF-8 (an invalid byte becomes '?'), no control characters but
// tab and line breaks, the five special characters escaped.
std::string xml_text(const std::string& in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= in.size();
    for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    if (!valid) {
      out += '?';
      ++i;
      continue;
    }
    if (n == 1) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          if (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += static_cast<char>(c);
      }
    } else {
      out.append(in, i, n);
    }
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && s[start] == ' ') ++start;
  return s.substr(start);
}

// The copyright as one text: its photographer and editor parts (NUL-separated) joined by "; ".
std::string copyright_text(const std::vector<uint8_t>& value) {
  std::string out, part;
  auto flush = [&] {
    part = trimmed(part);
    if (!part.empty()) out += (out.empty() ? "" : "; ") + part;
    part.clear();
  };
  for (uint8_t c : value) {
    if (c == 0) {
      flush();
    } else {
      part += static_cast<char>(c);
    }
  }
  flush();
  return out;
}

// The comment's text by its character code: ASCII, UNICODE (UTF-16, little-endian here) or
// undefined (read as ASCII); JIS and others give none.
std::string comment_text(const std::vector<uint8_t>& value) {
  if (value.size() < 8) return "";
  static const uint8_t kAsciiCode[8] = {'A', 'S', 'C', 'I', 'I', 0, 0, 0};
  static const uint8_t kUnicodeCode[8] = {'U', 'N', 'I', 'C', 'O', 'D', 'E', 0};
  static const uint8_t kUndefinedCode[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const uint8_t* code = value.data();
  std::string out;
  if (std::memcmp(code, kAsciiCode, 8) == 0 || std::memcmp(code, kUndefinedCode, 8) == 0) {
    out.assign(value.begin() + 8, value.end());
  } else if (std::memcmp(code, kUnicodeCode, 8) == 0) {
    for (size_t i = 8; i + 1 < value.size(); i += 2) {
      uint32_t unit = value[i] | value[i + 1] << 8;
      if (unit >= 0xD800 && unit <= 0xDBFF && i + 3 < value.size()) {
        const uint32_t low = value[i + 2] | value[i + 3] << 8;
        if (low >= 0xDC00 && low <= 0xDFFF) {
          unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          i += 2;
        }
      }
      if (unit >= 0xD800 && unit <= 0xDFFF) unit = '?';
      if (unit == 0) break;
      append_utf8(out, unit);
    }
  }
  return trimmed(out);
}

}  // namespace

ExifSubset parse_exif_subset(const uint8_t* data, size_t length) {
  ExifSubset none, subset;
  if (data == nullptr) return none;
  if (length >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0) {
    data += 6;
    length -= 6;
  }
  if (length < 8) return none;
  Tiff t{data, length, data[0] == 'I'};
  if (!((data[0] == 'I' && data[1] == 'I') || (data[0] == 'M' && data[1] == 'M'))) return none;
  uint16_t magic = 0;
  uint32_t ifd0 = 0;
  if (!t.u16(2, magic) || magic != 42 || !t.u32(4, ifd0)) return none;
  bool found = false;
  Entry e;
  if (!find_tag(t, ifd0, kCopyright, found, e)) return none;
  if (found && e.type == kAscii && e.count > 0 && e.count <= kMaxValue) {
    subset.copyright.assign(data + e.value_at, data + e.value_at + e.count);
    while (!subset.copyright.empty() && subset.copyright.back() == 0) subset.copyright.pop_back();
    subset.has_copyright = !subset.copyright.empty();
  }
  if (!find_tag(t, ifd0, kExifIfd, found, e)) return none;
  if (found && (e.type == kLong || e.type == kIfd) && e.count == 1) {
    Entry c;
    if (!find_tag(t, e.word, kUserComment, found, c)) return none;
    if (found && c.type == kUndefined && c.count >= 8 && c.count <= kMaxValue) {
      subset.comment.assign(data + c.value_at, data + c.value_at + c.count);
      // A UNICODE comment is UTF-16 in the input's byte order: ours is little-endian.
      if (!t.little && std::memcmp(subset.comment.data(), "UNICODE\0", 8) == 0) {
        for (size_t i = 8; i + 1 < subset.comment.size(); i += 2) std::swap(subset.comment[i], subset.comment[i + 1]);
      }
      subset.has_comment = true;
    }
  }
  return subset;
}

std::vector<uint8_t> build_exif(const ExifSubset& subset, int dpi) {
  if (!subset.has_copyright && !subset.has_comment && dpi <= 0) return {};
  struct Field {
    uint16_t tag, type;
    uint32_t count;
    std::vector<uint8_t> bytes;  // the value, little-endian
  };
  auto u16 = [](uint16_t v) { return std::vector<uint8_t>{static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8)}; };
  auto u32 = [](uint32_t v) {
    return std::vector<uint8_t>{static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
                                static_cast<uint8_t>(v >> 24)};
  };
  std::vector<Field> ifd0;
  ifd0.push_back({kOrientation, kShort, 1, u16(1)});
  if (dpi > 0) {
    std::vector<uint8_t> rational = u32(static_cast<uint32_t>(dpi));
    const std::vector<uint8_t> one = u32(1);
    rational.insert(rational.end(), one.begin(), one.end());
    ifd0.push_back({kXResolution, kRational, 1, rational});
    ifd0.push_back({kYResolution, kRational, 1, rational});
    ifd0.push_back({kResolutionUnit, kShort, 1, u16(2)});  // inches
  }
  if (subset.has_copyright) {
    std::vector<uint8_t> text = subset.copyright;
    text.push_back(0);
    ifd0.push_back({kCopyright, kAscii, static_cast<uint32_t>(text.size()), text});
  }
  std::vector<Field> exif_ifd;
  if (subset.has_comment) exif_ifd.push_back({kUserComment, kUndefined, static_cast<uint32_t>(subset.comment.size()), subset.comment});
  if (!exif_ifd.empty()) ifd0.push_back({kExifIfd, kLong, 1, u32(0)});  // its offset set below

  std::vector<uint8_t> out = {'I', 'I', 42, 0, 8, 0, 0, 0};
  // Writes an IFD at the end of `out`, its long values after it; returns where the entry of
  // `patch_tag` holds its value (0: none).
  auto write_ifd = [&](const std::vector<Field>& fields, uint16_t patch_tag) {
    const size_t start = out.size();
    const size_t table = 2 + fields.size() * 12 + 4;
    out.resize(start + table, 0);
    put16(out, start, static_cast<uint16_t>(fields.size()));
    size_t patch = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
      const Field& f = fields[i];
      const size_t at = start + 2 + i * 12;
      put16(out, at, f.tag);
      put16(out, at + 2, f.type);
      put32(out, at + 4, f.count);
      if (f.tag == patch_tag) patch = at + 8;
      if (f.bytes.size() <= 4) {
        std::memcpy(out.data() + at + 8, f.bytes.data(), f.bytes.size());
      } else {
        if (out.size() % 2 != 0) out.push_back(0);  // values start on a word boundary
        put32(out, at + 8, static_cast<uint32_t>(out.size()));
        out.insert(out.end(), f.bytes.begin(), f.bytes.end());
      }
    }
    // The next IFD's offset: none.
    return patch;
  };
  const size_t patch = write_ifd(ifd0, kExifIfd);
  if (!exif_ifd.empty()) {
    if (out.size() % 2 != 0) out.push_back(0);
    put32(out, patch, static_cast<uint32_t>(out.size()));
    write_ifd(exif_ifd, 0);
  }
  return out;
}

std::vector<uint8_t> build_xmp(const ExifSubset& subset) {
  const std::string rights = subset.has_copyright ? copyright_text(subset.copyright) : "";
  const std::string comment = subset.has_comment ? comment_text(subset.comment) : "";
  if (rights.empty() && comment.empty()) return {};
  auto alt = [](const char* name, const std::string& text) {
    return std::string("<") + name + "><rdf:Alt><rdf:li xml:lang=\"x-default\">" + xml_text(text) + "</rdf:li></rdf:Alt></" + name + ">";
  };
  std::string xmp =
      "<?xpacket begin=\"\xEF\xBB\xBF\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>"
      "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
      "<rdf:Description rdf:about=\"\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:exif=\"http://ns.adobe.com/exif/1.0/\">";
  if (!rights.empty()) xmp += alt("dc:rights", rights);
  if (!comment.empty()) xmp += alt("exif:UserComment", comment);
  xmp += "</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end=\"w\"?>";
  return std::vector<uint8_t>(xmp.begin(), xmp.end());
}

bool is_rgb_icc(const uint8_t* data, size_t length) {
  if (data == nullptr || length < 132 || length > (64u << 20)) return false;
  const uint32_t declared = uint32_t{data[0]} << 24 | uint32_t{data[1]} << 16 | uint32_t{data[2]} << 8 | data[3];
  return declared == length && std::memcmp(data + 36, "acsp", 4) == 0 && std::memcmp(data + 16, "RGB ", 4) == 0;
}

}  // namespace bgone
