"""Deterministic offline sentences in six languages for a miniature TTS corpus.

Sentences come from a small hand-written phrase grammar per language: a subject, a verb
with its object, and optionally a place and a time, put in the language's natural order.
Phrases are complete units (articles, cases and agreement are fixed inside each phrase), so
every combination is grammatical. Each language has up to 12 x 20 x 11 x 11 ~ 29,000 distinct
sentences; those outside 4-15 whitespace words are skipped (Chinese, written without spaces,
has 3-5 phrases, about 4-12 words).

Japanese is emitted in kana with spaces between phrases (as in kana-only texts), because
espeak-ng reads kanji as "Chinese letter". Readings are hand-written next to the kanji; the
topic particle は is written わ (how it is spoken; espeak-ng otherwise says "ha").
"""
from __future__ import annotations

import random

from helpers.backends.languages import CODES as LANGUAGES, language
from helpers.method.checks import int_at_least

MIN_WORDS, MAX_WORDS = 4, 15  # whitespace words (Japanese: kana phrases); Chinese unchecked

# Per language: subjects, (verb, object) pairs, places, times, and the word order.
_EN = dict(
    subj="The old teacher|My younger sister|Our neighbor|A tired doctor|The little boy|Her grandfather|"
         "The new student|A friendly waiter|The farmer|My best friend|The young pilot|His mother",
    vo="reads/a long letter|buys/fresh bread|drinks/a cup of tea|writes/a short story|paints/the old fence|"
       "cooks/a simple dinner|opens/the heavy door|carries/two old boxes|finds/a small key|"
       "repairs/the broken bicycle|waters/the flowers|feeds/the hungry cat|sings/a quiet song|"
       "washes/the blue car|plays/the piano|cleans/the windows|calls/an old friend|sells/sweet apples|"
       "draws/a map of the city|watches/the evening news",
    place="in the park|at the station|near the river|in the kitchen|on the balcony|at the market|"
          "in the garden|behind the school|in a small village|by the lake",
    time="every morning|on Sunday|after lunch|before dinner|in the evening|today|at noon|once a week|"
         "during the winter|late at night",
    order="S V O P T", end=".",
)
_DE = dict(
    subj="Der alte Lehrer|Meine kleine Schwester|Unser Nachbar|Eine müde Ärztin|Der kleine Junge|Ihr Großvater|"
         "Die neue Studentin|Ein freundlicher Kellner|Der Bauer|Mein bester Freund|Die junge Pilotin|Seine Mutter",
    vo="liest/einen langen Brief|kauft/frisches Brot|trinkt/eine Tasse Tee|schreibt/eine kurze Geschichte|"
       "streicht/den alten Zaun|kocht/ein einfaches Abendessen|öffnet/die schwere Tür|trägt/zwei alte Kisten|"
       "findet/einen kleinen Schlüssel|repariert/das kaputte Fahrrad|gießt/die Blumen|"
       "füttert/die hungrige Katze|singt/ein leises Lied|wäscht/das blaue Auto|spielt/Klavier|"
       "putzt/die Fenster|besucht/einen alten Freund|verkauft/süße Äpfel|zeichnet/eine Karte der Stadt|"
       "sieht/die Abendnachrichten",
    place="im Park|am Bahnhof|am Fluss|in der Küche|auf dem Balkon|auf dem Markt|im Garten|hinter der Schule|"
          "in einem kleinen Dorf|am See",
    time="jeden Morgen|am Sonntag|nach dem Mittagessen|vor dem Abendessen|am Abend|heute|am Mittag|"
         "einmal pro Woche|im Winter|spät in der Nacht",
    order="S V T P O", end=".",
)
_ES = dict(
    subj="El viejo profesor|Mi hermana pequeña|Nuestro vecino|Una médica cansada|El niño pequeño|Su abuelo|"
         "La nueva estudiante|Un camarero amable|El granjero|Mi mejor amigo|La joven piloto|Su madre",
    vo="lee/una carta larga|compra/pan fresco|bebe/una taza de té|escribe/un cuento corto|"
       "pinta/la valla vieja|prepara/una cena sencilla|abre/la puerta pesada|lleva/dos cajas viejas|"
       "encuentra/una llave pequeña|repara/la bicicleta rota|riega/las flores|alimenta/al gato hambriento|"
       "canta/una canción tranquila|lava/el coche azul|toca/el piano|limpia/las ventanas|"
       "visita/a un viejo amigo|vende/manzanas dulces|dibuja/un mapa de la ciudad|mira/las noticias de la noche",
    place="en el parque|en la estación|cerca del río|en la cocina|en el balcón|en el mercado|en el jardín|"
          "detrás de la escuela|en un pueblo pequeño|junto al lago",
    time="cada mañana|el domingo|después de comer|antes de la cena|por la tarde|hoy|al mediodía|"
         "una vez por semana|durante el invierno|muy tarde por la noche",
    order="S V O P T", end=".",
)
_RU = dict(
    subj="Старый учитель|Моя младшая сестра|Наш сосед|Усталый врач|Маленький мальчик|Её дедушка|"
         "Новая студентка|Вежливый официант|Фермер|Мой лучший друг|Молодой пилот|Его мать",
    vo="читает/длинное письмо|покупает/свежий хлеб|пьёт/чашку чая|пишет/короткий рассказ|красит/старый забор|"
       "готовит/простой ужин|открывает/тяжёлую дверь|несёт/две старые коробки|находит/маленький ключ|"
       "чинит/сломанный велосипед|поливает/цветы|кормит/голодную кошку|поёт/тихую песню|моет/синюю машину|"
       "слушает/старое радио|убирает/комнату|встречает/старого друга|продаёт/сладкие яблоки|"
       "рисует/карту города|смотрит/вечерние новости",
    place="в парке|на вокзале|у реки|на кухне|на балконе|на рынке|в саду|за школой|в маленькой деревне|у озера",
    time="каждое утро|в воскресенье|после обеда|перед ужином|вечером|сегодня|в полдень|раз в неделю|зимой|"
         "поздно ночью",
    order="S V O P T", end=".",
)
# Japanese entries are kanji=kana; the kana (spoken) form is what the corpus returns.
_JA = dict(
    subj="年配の先生=ねんぱいの せんせい|妹=いもうと|隣の人=となりの ひと|疲れた医者=つかれた いしゃ|"
         "小さな男の子=ちいさな おとこのこ|祖父=そふ|新しい学生=あたらしい がくせい|親切な店員=しんせつな てんいん|"
         "農家の人=のうかの ひと|親友=しんゆう|若いパイロット=わかい パイロット|母=はは",
    vo="読みます=よみます/長い手紙を=ながい てがみを|買います=かいます/新鮮なパンを=しんせんな パンを|"
       "飲みます=のみます/お茶を=おちゃを|書きます=かきます/短い物語を=みじかい ものがたりを|"
       "塗ります=ぬります/古い塀を=ふるい へいを|作ります=つくります/簡単な夕食を=かんたんな ゆうしょくを|"
       "開けます=あけます/重いドアを=おもい ドアを|運びます=はこびます/古い箱を二つ=ふるい はこを ふたつ|"
       "見つけます=みつけます/小さな鍵を=ちいさな かぎを|直します=なおします/壊れた自転車を=こわれた じてんしゃを|"
       "やります=やります/花に水を=はなに みずを|餌をやります=えさを やります/お腹が空いた猫に=おなかが すいた ねこに|"
       "歌います=うたいます/静かな歌を=しずかな うたを|洗います=あらいます/青い車を=あおい くるまを|"
       "弾きます=ひきます/ピアノを=ピアノを|掃除します=そうじ します/窓を=まどを|"
       "電話します=でんわ します/古い友達に=ふるい ともだちに|売ります=うります/甘いりんごを=あまい りんごを|"
       "描きます=かきます/町の地図を=まちの ちずを|見ます=みます/夜のニュースを=よるの ニュースを",
    place="公園で=こうえんで|駅で=えきで|川の近くで=かわの ちかくで|台所で=だいどころで|ベランダで=ベランダで|"
          "市場で=いちばで|庭で=にわで|学校の裏で=がっこうの うらで|小さな村で=ちいさな むらで|湖のそばで=みずうみの そばで",
    time="毎朝=まいあさ|日曜日に=にちようびに|昼ご飯の後で=ひるごはんの あとで|晩ご飯の前に=ばんごはんの まえに|"
         "夕方=ゆうがた|今日=きょう|正午に=しょうごに|週に一度=しゅうに いちど|冬の間=ふゆの あいだ|夜遅く=よる おそく",
    order="S T P O V", end="。",
)
_ZH = dict(
    subj="老师|我妹妹|我们的邻居|那位医生|小男孩|他的爷爷|新来的学生|服务员|农民|我的好朋友|年轻的飞行员|她的妈妈",
    vo="读/一封长信|买/新鲜的面包|喝/一杯茶|写/一个短故事|刷/旧篱笆|做/一顿简单的晚饭|打开/那扇重门|"
       "搬/两个旧箱子|找到/一把小钥匙|修/那辆坏自行车|浇/花|喂/那只饿猫|唱/一首安静的歌|洗/那辆蓝色的车|"
       "弹/钢琴|擦/窗户|看望/一位老朋友|卖/甜苹果|画/一张城市地图|看/晚间新闻",
    place="在公园里|在火车站|在河边|在厨房里|在阳台上|在市场上|在花园里|在学校后面|在一个小村子里|在湖边",
    time="每天早上|星期天|午饭以后|晚饭以前|傍晚|今天|中午|有时候|冬天|深夜",
    order="S T P V O", end="。",
)
_GRAMMARS = {"en": _EN, "de": _DE, "es": _ES, "ru": _RU, "ja": _JA, "zh": _ZH}
_JA_TOPIC = " わ "  # particle は as spoken


def _spaced(lang: str) -> bool:
    """Whether the corpus puts spaces between phrases: where the language does, and in Japanese (kana phrases)."""
    return lang == "ja" or not language(lang).spaceless


def _spoken(phrase: str) -> str:
    """For Japanese 'kanji=kana' entries keep the kana; other languages pass through."""
    return phrase.split("=", 1)[-1]


def _one(lang: str, rng: random.Random) -> str:
    g = _GRAMMARS[lang]
    verb, obj = rng.choice(g["vo"].split("|")).split("/")
    parts = {
        "S": rng.choice(g["subj"].split("|")),
        "V": verb,
        "O": obj,
        "P": rng.choice(g["place"].split("|")) if rng.random() < 0.6 else "",
        "T": rng.choice(g["time"].split("|")) if rng.random() < 0.5 else "",
    }
    words = [_spoken(parts[k]) for k in g["order"].split() if parts[k]]
    if lang == "ja":
        text = words[0] + _JA_TOPIC + " ".join(words[1:])
    else:
        text = (" " if _spaced(lang) else "").join(words)
    return text + g["end"]


def _unique(lang: str, n: int, seed: int, exclude: set[str] = frozenset()) -> list[str]:
    rng = random.Random(f"corpus:{lang}:{seed}")  # str seeds are hashed stably (sha512)
    out, seen = [], set(exclude)
    for _ in range(50 * n + 1000):
        if len(out) == n:
            return out
        s = _one(lang, rng)
        if _spaced(lang) and not MIN_WORDS <= len(s.split()) <= MAX_WORDS:
            continue
        if s not in seen:
            seen.add(s)
            out.append(s)
    if len(out) < n:
        raise ValueError(f"could only make {len(out)} distinct {lang} sentences, {n} requested")
    return out


def sentences(lang: str, n: int, seed: int = 0) -> list[str]:
    """``n`` distinct sentences in ``lang`` (one of :data:`LANGUAGES`); same seed, same list.

    Japanese comes out in kana with phrase spacing; Chinese in simplified characters.
    """
    language(lang)
    return _unique(lang, int_at_least("n", n, 0), seed)


def make_corpus(seed: int, counts: dict[str, tuple[tuple[str, ...], int]]) -> dict[str, list[tuple[str, str]]]:
    """Sentences by role, no sentence in two roles: counts = {role: (languages, sentences per language)}.

    For each language one distinct list is drawn and cut in role order, so roles are disjoint.
    """
    for role, (langs, n) in counts.items():
        for lang in langs:
            language(lang)
        int_at_least(f"sentence count of role {role!r}", n, 0)
    corpus: dict[str, list[tuple[str, str]]] = {role: [] for role in counts}
    for lang in LANGUAGES:
        roles = [(role, n) for role, (langs, n) in counts.items() if lang in langs]
        pool = sentences(lang, sum(n for _, n in roles), seed)
        start = 0
        for role, n in roles:
            corpus[role] += [(lang, s) for s in pool[start:start + n]]
            start += n
    return corpus
