"""The result pictures in the page's language, with fonts that have the glyphs."""
from __future__ import annotations

import re
import warnings

import pytest

from pages_support import ada, db_session, env, grade_queued, prof  # noqa: F401


def _report_with_pictures(code, task, **_):
    return {
        "task": task, "score": 3.0, "max_score": 10.0, "passed": False, "error": None,
        "grader_version": "pictures-1", "sandbox": "none", "warnings": [], "timings": {},
        "checks": [
            {"id": "mask.bool", "passed": False, "points": 0.0, "max_points": 4.0, "message": "mask ignored",
             "details": {"case": "L=2, S=2", "weights_submission": [[0.5, 0.5], [0.25, None]],
                         "weights_reference": [[1.0, 0.0], [0.5, 0.5]]}},
            {"id": "scale.default", "passed": False, "points": 3.0, "max_points": 6.0, "message": "no scaling",
             "details": {"variance_by_dk": [{"d_k": d, "variance": float(d), "expected": 1.0}
                                            for d in (8, 16, 32, 64)]}},
        ],
    }


def _svg_texts(svg: bytes) -> str:
    """The SVG's text (svg.fonttype 'none': labels are <text>, not glyph paths)."""
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg.decode("utf-8")))


def _submission(env, client, lang):
    client.post("/language", data={"lang": lang})
    sent = client.post("/tasks/sdpa", data={"code": "z = 0\n"})
    sid = int(re.search(r"/submissions/(\d+)$", sent.location).group(1))
    grade_queued(env, _report_with_pictures)
    return sid


@pytest.mark.parametrize("lang, labels, english", [
    ("zh", ("你的权重", "键位置", "查询位置", "NaN（非数字）"), "key position"),
    ("ru", ("ваши веса", "позиция ключа", "позиция запроса"), "key position")])
def test_the_heatmap_and_variance_plot_follow_the_page(env, ada, lang, labels, english):
    sid = _submission(env, ada, lang)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    url = re.search(rf'src="(/submissions/{sid}/checks/0/weights\.svg[^"]*)"', page).group(1)
    assert f"lang={lang}" in url  # the browser caches each language's picture apart
    heat = ada.get(url.replace("&amp;", "&"))
    assert heat.headers["Content-Language"] == lang
    shown = _svg_texts(heat.data)
    assert all(label in shown for label in labels), shown
    assert english not in shown
    variance = _svg_texts(ada.get(f"/submissions/{sid}/checks/1/variance.svg?lang={lang}").data)
    assert {"zh": "logit 的方差", "ru": "дисперсия логитов"}[lang] in variance
    # the URL's language decides, not the session's: a cached English picture stays English
    assert "key position" in _svg_texts(ada.get(f"/submissions/{sid}/checks/0/weights.svg?lang=en").data)


def test_instructor_charts_follow_the_page(env, prof):
    prof.post("/language", data={"lang": "zh"})
    assert "学生" in _svg_texts(prof.get("/instructor/charts/sdpa/scores.svg").data)
    assert "还没有计分检查失败" in _svg_texts(prof.get("/instructor/charts/sdpa/failures.svg").data)


def test_chinese_labels_are_measured_with_a_font_that_has_them():
    """matplotlib lays the labels out (bbox_inches='tight') with the fallback list; DejaVu
    alone has no CJK glyphs and warns that they are missing (they would be boxes)."""
    from flask import Flask
    from flask_babel import Babel, force_locale
    from matplotlib import font_manager

    from web.i18n import TRANSLATIONS
    from web.pages import charts

    if not any("CJK" in font.name for font in font_manager.fontManager.ttflist):
        pytest.skip("no Noto CJK font installed (scripts/system-deps.sh installs fonts-noto-cjk)")
    assert any("CJK" in family for family in charts.matplotlib.rcParams["font.family"])
    app = Flask(__name__)
    Babel(app, default_translation_directories=str(TRANSLATIONS))
    with app.test_request_context(), force_locale("zh"), warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        svg = charts.weights_heatmaps([[0.5, 0.5], [0.25, 0.75]])
    assert "键位置" in _svg_texts(svg)


def test_a_picture_is_drawn_once_per_data_and_language(monkeypatch):
    """Pictures are kept by their data and language: the same one asked again is not drawn again
    (matplotlib was two thirds of the web process's CPU), new data or another language is."""
    from flask import Flask
    from flask_babel import Babel, force_locale

    from web.i18n import TRANSLATIONS
    from web.pages import charts

    drawn = []
    svg = charts._svg
    monkeypatch.setattr(charts, "_svg", lambda fig: drawn.append(1) or svg(fig))
    heatmaps = charts.kept(charts.weights_heatmaps.__wrapped__, size=2)  # two kept, for the eviction
    app = Flask(__name__)
    Babel(app, default_translation_directories=str(TRANSLATIONS))
    weights = [[0.5, 0.5], [0.125, 0.875]]
    with app.test_request_context():
        with force_locale("en"):
            first = heatmaps(weights)
            assert heatmaps(weights) == first and len(drawn) == 1
            assert heatmaps([[0.5, 0.5], [0.25, 0.75]]) != first and len(drawn) == 2
        with force_locale("ru"):
            assert "позиция ключа" in _svg_texts(heatmaps(weights)) and len(drawn) == 3
        with force_locale("en"):  # two kept: the first English one made room for the Russian one
            assert heatmaps(weights) == first and len(drawn) == 4
