// The SVG/XML helper every chart uses (io/svg.h): the escaping and the opening element, byte
// for byte as the charts wrote them before they shared it.
#include "io/svg.h"

#include <gtest/gtest.h>

namespace snug {
namespace {
namespace svg_test {

TEST(Svg, EscapesTheFourCharactersThatBreakTextOrAttributes) {
  EXPECT_EQ(xml_escape("a <b> & \"c\" 'd'"), "a &lt;b&gt; &amp; &quot;c&quot; 'd'");
  EXPECT_EQ(xml_escape(""), "");
  EXPECT_EQ(xml_escape("&amp;"), "&amp;amp;");  // not idempotent: escape once
}

TEST(Svg, OpeningElementHasTheSizeAsViewBox) {
  EXPECT_EQ(svg_open(960, 410),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"410\" "
            "viewBox=\"0 0 960 410\" font-family=\"sans-serif\" font-size=\"12\">\n");
}

}  // namespace svg_test
}  // namespace
}  // namespace snug
