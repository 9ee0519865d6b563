#include "data/builtin_corpus.h"

#include <span>
#include <string_view>

#include "core/random.h"

namespace snug {
namespace {

using Words = std::span<const std::string_view>;

constexpr std::string_view kNames[] = {"anna",  "ben",   "clara", "david", "emma", "felix",
                                       "grace", "henry", "iris",  "jack",  "lena", "max"};
constexpr std::string_view kAnimals[] = {"cat",   "dog", "bird", "fox",  "horse", "rabbit",
                                         "mouse", "owl", "goat", "duck", "bear",  "frog"};
constexpr std::string_view kThings[] = {"book",  "cup",   "ball",   "box",    "lamp",   "chair",
                                        "table", "apple", "bread",  "letter", "basket", "key",
                                        "coat",  "stone", "flower", "clock"};
constexpr std::string_view kPlaces[] = {"garden", "kitchen", "forest",  "river",
                                        "market", "school",  "village", "field",
                                        "hill",   "house",   "bridge",  "library"};
constexpr std::string_view kAdjectives[] = {"small",  "big",   "old",   "young", "red",  "green",
                                            "blue",   "quiet", "happy", "tired", "warm", "cold",
                                            "bright", "dark",  "brown", "white"};
constexpr std::string_view kTransitive[] = {"sees",    "finds",  "carries", "likes", "follows",
                                            "watches", "brings", "holds",   "wants", "helps"};
constexpr std::string_view kIntransitive[] = {"sleeps", "runs", "sings", "waits", "plays",
                                              "walks",  "sits", "jumps", "rests", "works"};
constexpr std::string_view kPast[] = {"saw",     "found",   "carried", "liked",  "followed",
                                      "watched", "brought", "held",    "wanted", "helped"};
constexpr std::string_view kPrepositions[] = {"in", "near", "behind", "under", "by", "across"};
constexpr std::string_view kTimes[] = {"in the morning", "at noon",      "in the evening",
                                       "at night",       "every day",    "on sunday",
                                       "after lunch",    "before dinner"};
constexpr std::string_view kWeather[] = {"sunny", "rainy", "windy", "cloudy", "cold", "warm"};
constexpr std::string_view kNumbers[] = {"one", "two",   "three", "four", "five",
                                         "six", "seven", "eight", "nine", "ten"};
constexpr std::string_view kColors[] = {"red", "green", "blue", "brown", "white", "yellow"};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::string_view pick(Words w) { return w[rng_.below(w.size())]; }
  uint64_t below(uint64_t n) { return rng_.below(n); }

  // The noun phrase "the [adj] noun" with an optional adjective.
  void noun_phrase(std::string& s, Words nouns) {
    s += "the ";
    if (below(2) == 0) {
      s += pick(kAdjectives);
      s += ' ';
    }
    s += pick(nouns);
  }
  Words any_noun() { return below(2) == 0 ? Words(kAnimals) : Words(kThings); }

  // One sentence, lowercase, ending in punctuation (no trailing space).
  std::string sentence() {
    std::string s;
    switch (below(10)) {
      case 0:  // the old cat sees the red ball.
        noun_phrase(s, kAnimals);
        s += ' ';
        s += pick(kTransitive);
        s += ' ';
        noun_phrase(s, any_noun());
        s += '.';
        break;
      case 1:  // the dog sleeps under the table in the morning.
        noun_phrase(s, kAnimals);
        s += ' ';
        s += pick(kIntransitive);
        s += ' ';
        s += pick(kPrepositions);
        s += ' ';
        noun_phrase(s, below(2) == 0 ? Words(kThings) : Words(kPlaces));
        if (below(2) == 0) {
          s += ' ';
          s += pick(kTimes);
        }
        s += '.';
        break;
      case 2: {  // anna saw three cats near the river.
        s += pick(kNames);
        s += ' ';
        s += pick(kPast);
        s += ' ';
        const uint64_t n = below(std::size(kNumbers));
        s += kNumbers[n];
        s += ' ';
        s += pick(kAnimals);
        if (n > 0) s += 's';
        s += ' ';
        s += pick(kPrepositions);
        s += ' ';
        noun_phrase(s, kPlaces);
        s += '.';
        break;
      }
      case 3: {  // where is the key? the key is under the chair.
        const std::string_view thing = pick(kThings);
        s += "where is the ";
        s += thing;
        s += "? The ";
        s += thing;
        s += " is ";
        s += pick(kPrepositions);
        s += ' ';
        noun_phrase(s, below(2) == 0 ? Words(kThings) : Words(kPlaces));
        s += '.';
        break;
      }
      case 4:  // it is rainy in the village today.
        s += "it is ";
        s += pick(kWeather);
        s += " in the ";
        s += pick(kPlaces);
        s += " today.";
        break;
      case 5: {  // one, two, three, four.
        const uint64_t start = below(5);
        const uint64_t len = 3 + below(4);
        for (uint64_t i = 0; i < len && start + i < std::size(kNumbers); ++i) {
          if (i > 0) s += ", ";
          s += kNumbers[start + i];
        }
        s += '.';
        break;
      }
      case 6:  // ben likes the green apple and the old book.
        s += pick(kNames);
        s += ' ';
        s += pick(kTransitive);
        s += ' ';
        noun_phrase(s, kThings);
        s += " and ";
        noun_phrase(s, kThings);
        s += '.';
        break;
      case 7:  // the ball is red.
        s += "the ";
        s += pick(kThings);
        s += " is ";
        s += pick(kColors);
        s += '.';
        break;
      case 8:  // emma walks to the market with the dog.
        s += pick(kNames);
        s += " walks to the ";
        s += pick(kPlaces);
        s += " with ";
        noun_phrase(s, kAnimals);
        s += '.';
        break;
      default:  // "the owl is happy," said grace.
        s += "\"the ";
        s += pick(kAnimals);
        s += " is ";
        s += pick(kAdjectives);
        s += ",\" said ";
        s += pick(kNames);
        s += '.';
        break;
    }
    return s;
  }

 private:
  SplitMix64 rng_;
};

void capitalize_first_letter(std::string& s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
      return;
    }
    if (c != '"') return;
  }
}

std::string generate() {
  Generator g(0x736e7567636f7270ull);  // "snugcorp"
  std::string text;
  text.reserve(static_cast<size_t>(kBuiltinCorpusTargetBytes) + 1024);
  while (static_cast<int64_t>(text.size()) < kBuiltinCorpusTargetBytes) {
    const uint64_t sentences = 3 + g.below(5);
    for (uint64_t i = 0; i < sentences; ++i) {
      std::string s = g.sentence();
      capitalize_first_letter(s);
      if (i > 0) text += ' ';
      text += s;
    }
    text += '\n';
  }
  return text;
}

}  // namespace

const std::string& builtin_corpus_text() {
  static const std::string text = generate();
  return text;
}

}  // namespace snug
