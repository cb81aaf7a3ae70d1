"""storage: the results database, SQLite by default or PostgreSQL, laid out by schema.sql.

    db.py             Database: open (create, upgrade, or refuse with what to do), its tables
    sqlite_schema.py  whose SQLite file it is, and its version
    sqlite_access.py  a SQLite file another program holds locked (waited for, bounded, said), one
                      in a read-only place (read read-only, refused to a writer), a full one
    postgres.py       the schema translated for PostgreSQL, and its version row
    migrate.py        an older database brought up to schema.sql: the additions, and version 13's
                      fold of the fault worker's ten columns into runs.fault
    setting_columns.py  each setting of a run as a SQL expression (its column, or its part of
                      runs.fault), for the reports' selections and filters
    transfer.py       sweeps as one JSON document (bench export), checked against the schema and
                      added to another database in one transaction (bench import)

May import: text, config. What is written into it is the sweep's business (sweep/recording.py);
what is read out, the report's.
"""
