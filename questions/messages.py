"""The grader's own feedback sentences, in every language of the bank."""
from __future__ import annotations

MESSAGES = {
    "correct": {"en": "Correct.", "ru": "Верно.", "zh": "正确。"},
    "incorrect": {"en": "Not correct.", "ru": "Неверно.", "zh": "不正确。"},
    "partial": {"en": "Partly correct: {got} of {total}.", "ru": "Частично верно: {got} из {total}.",
                "zh": "部分正确：{total} 项中对了 {got} 项。"},
    "partial_short": {"en": "Partly correct.", "ru": "Частично верно.", "zh": "部分正确。"},
    "missed": {"en": "You left out {n} correct option(s).",
               "ru": "Вы не отметили верных вариантов: {n}.",
               "zh": "有 {n} 个正确选项没有选。"},
    "numeric_high": {"en": "Your value {value} is too large.", "ru": "Ваше значение {value} слишком велико.",
                     "zh": "你的数值 {value} 偏大。"},
    "numeric_low": {"en": "Your value {value} is too small.", "ru": "Ваше значение {value} слишком мало.",
                    "zh": "你的数值 {value} 偏小。"},
    "positions": {"en": "{got} of {total} items are in the right place.",
                  "ru": "На своём месте {got} из {total} элементов.",
                  "zh": "{total} 项中有 {got} 项位置正确。"},
    "pairs": {"en": "{got} of {total} pairs are matched correctly.",
              "ru": "Верно сопоставлено пар: {got} из {total}.",
              "zh": "{total} 对中有 {got} 对匹配正确。"},
    "pending": {"en": "Your answer is saved; an instructor will grade it against the rubric.",
                "ru": "Ответ сохранён; преподаватель оценит его по критериям.",
                "zh": "答案已保存，教师将按评分标准批改。"},
    "rubric": {"en": "Graded by the instructor: {got} of {total} points.",
               "ru": "Оценено преподавателем: {got} из {total} баллов.",
               "zh": "教师评分：{total} 分中得 {got} 分。"},
    "code_pass": {"en": "All {total} test calls return the expected result.",
                  "ru": "Все {total} тестовых вызовов возвращают ожидаемый результат.",
                  "zh": "全部 {total} 个测试调用都返回了预期结果。"},
    "code_fail": {"en": "{got} of {total} test calls pass. First failure, {call}: {why}",
                  "ru": "Проходят {got} из {total} тестовых вызовов. Первая ошибка, {call}: {why}",
                  "zh": "{total} 个测试调用中通过 {got} 个。第一个失败的调用 {call}：{why}"},
    "code_error": {"en": "The code did not run: {why}", "ru": "Код не выполнился: {why}",
                   "zh": "代码未能运行：{why}"},
    "why_type": {"en": "expected a tensor, got {got}", "ru": "ожидался тензор, получено {got}",
                 "zh": "应返回张量，实际得到 {got}"},
    "why_shape": {"en": "expected shape {want}, got {got}", "ru": "ожидалась форма {want}, получено {got}",
                  "zh": "形状应为 {want}，实际为 {got}"},
    "why_dtype": {"en": "expected dtype {want}, got {got}", "ru": "ожидался dtype {want}, получено {got}",
                  "zh": "dtype 应为 {want}，实际为 {got}"},
    "why_values": {"en": "wrong values (largest difference {diff})",
                   "ru": "неверные значения (наибольшее расхождение {diff})",
                   "zh": "数值错误（最大差值 {diff}）"},
    "decimal_point": {"en": "Write the number with a decimal point, for example 0.125.",
                      "ru": "Запишите число с десятичной точкой, например 0.125.",
                      "zh": "请用小数点书写数字，例如 0.125。"},
    "why_finite_mask": {
        "en": "the hidden entries hold a large finite number ({value}) instead of −∞ (float('-inf')); "
              "a finite stand-in still gives them a tiny weight, and a row with every key hidden "
              "becomes a uniform average instead of having no valid key",
        "ru": "в скрытых позициях стоит большое конечное число ({value}), а не −∞ (float('-inf')); "
              "конечная замена всё же даёт им крошечный вес, а строка, где скрыты все ключи, "
              "превращается в равномерное среднее, хотя допустимых ключей в ней нет",
        "zh": "被屏蔽的位置是一个很大的有限数（{value}），而不是 −∞（float('-inf')）；有限的替代值仍会给它们极小的权重，"
              "而所有键都被屏蔽的一行会变成均匀平均，尽管其中没有任何有效的键"},
    "why_entries": {"en": "{wrong} of {total} entries are wrong", "ru": "неверных элементов: {wrong} из {total}",
                    "zh": "{total} 个元素中有 {wrong} 个错误"},
    "why_mutated": {"en": "it changed its input {names} in place",
                    "ru": "функция изменила входные данные {names} на месте",
                    "zh": "函数就地修改了输入 {names}"},
}


def msg(key: str, lang: str, **values) -> str:
    table = MESSAGES[key]
    return table.get(lang, table["en"]).format(**values)
