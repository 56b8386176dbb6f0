# English: day, abbreviated month, year; 24-hour time. No trailing period ("p.m.") that a
# sentence would double.
DATE_FORMAT = "j M Y"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "j M Y, H:i"
SHORT_DATE_FORMAT = DATE_FORMAT
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
YEAR_MONTH_FORMAT = "F Y"
MONTH_DAY_FORMAT = "j F"
